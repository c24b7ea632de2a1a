package jsonanswer_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/admit-dev/admit/internal/jsonanswer"
)

// TestWrite checks the status, the header fields and the body of an answer.
func TestWrite(t *testing.T) {
	rec := httptest.NewRecorder()
	jsonanswer.Write(rec, http.StatusTeapot, struct {
		Error string `json:"error"`
	}{"short and stout"})
	h := rec.Header()
	if rec.Code != http.StatusTeapot || rec.Body.String() != `{"error":"short and stout"}`+"\n" || h.Get("Content-Type") != "application/json" ||
		h.Get("Cache-Control") != "no-store" || h.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("answer %d %v %q", rec.Code, h, rec.Body)
	}
}
