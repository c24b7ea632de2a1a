package jsonanswer_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
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

// TestWriteFieldsShared checks that a caller who adds to or changes an answer's header fields
// after Write changes that answer only: Write shares the fields' values among answers.
func TestWriteFieldsShared(t *testing.T) {
	first := httptest.NewRecorder()
	jsonanswer.Write(first, http.StatusOK, "first")
	first.Header().Add("Content-Type", "text/plain")
	first.Header().Set("Cache-Control", "max-age=1")
	second := httptest.NewRecorder()
	jsonanswer.Write(second, http.StatusOK, "second")
	h := second.Header()
	if got := h.Values("Content-Type"); len(got) != 1 || got[0] != "application/json" {
		t.Errorf("Content-Type of the second answer %q; want [application/json]", got)
	}
	if got := h.Get("Cache-Control"); got != "no-store" {
		t.Errorf("Cache-Control of the second answer %q; want no-store", got)
	}
	h.Add("Content-Type", "text/html")
	if got := first.Header().Values("Content-Type"); len(got) != 2 || got[1] != "text/plain" {
		t.Errorf("Content-Type of the first answer %q; want application/json, text/plain", got)
	}
}

// TestWriteBuffersReused checks that an answer's body is its own after a longer one: the
// buffers Write reuses hold nothing of the answer before.
func TestWriteBuffersReused(t *testing.T) {
	long := strings.Repeat("x", 10000)
	for range 3 {
		for _, v := range []string{long, "short"} {
			rec := httptest.NewRecorder()
			jsonanswer.Write(rec, http.StatusOK, v)
			if want := `"` + v + `"` + "\n"; rec.Body.String() != want {
				t.Fatalf("body of %d bytes; want %d", rec.Body.Len(), len(want))
			}
		}
	}
}

// TestWritePanicsUnmarshalable checks that a value that does not marshal panics before anything
// is written.
func TestWritePanicsUnmarshalable(t *testing.T) {
	rec := httptest.NewRecorder()
	defer func() {
		if recover() == nil {
			t.Error("Write of a channel did not panic")
		}
		if rec.Body.Len() != 0 || len(rec.Header()) != 0 {
			t.Errorf("Write that panicked wrote %v %q", rec.Header(), rec.Body)
		}
	}()
	jsonanswer.Write(rec, http.StatusOK, make(chan int))
}
