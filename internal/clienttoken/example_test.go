package clienttoken_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"

	"github.com/admit-dev/admit/internal/clienttoken"
)

func Example() {
	dir, _ := os.MkdirTemp("", "clienttoken")
	defer os.RemoveAll(dir)
	file := filepath.Join(dir, "tokens")
	os.WriteFile(file, []byte("# one line a token\nci-runner-0123456789abcdef\n"), 0o600)

	tokens, err := clienttoken.Load(file)
	if err != nil {
		fmt.Println(err)
		return
	}
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "decided") })
	h := tokens.HTTP(api, "/healthz") // and grpc.NewServer(tokens.GRPC()...)

	for _, auth := range []string{"", "Bearer wrong-token-0123456789", "Bearer ci-runner-0123456789abcdef"} {
		req := httptest.NewRequest("POST", "/v1/check", nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		fmt.Println(rec.Code)
	}
	// Output:
	// 401
	// 401
	// 200
}
