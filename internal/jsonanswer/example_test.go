package jsonanswer_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/admit-dev/admit/internal/jsonanswer"
)

func Example() {
	rec := httptest.NewRecorder()
	jsonanswer.Write(rec, http.StatusNotFound, map[string]string{"error": "no such thing"})
	fmt.Print(rec.Code, " ", rec.Header().Get("Content-Type"), " ", rec.Body)
	// Output: 404 application/json {"error":"no such thing"}
}
