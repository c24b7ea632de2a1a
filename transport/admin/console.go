package admin

import (
	"embed"
	"net/http"
	"strings"
)

// consoleFiles are the operator console's page, script, style sheet and picture of the algorithms:
// everything it needs, no
// other origin's, so that it works offline.
//
//go:embed console/index.html console/console.js console/console.css console/algorithms.svg
var consoleFiles embed.FS

// consolePaths are the console's paths and the file and media type each serves.
var consolePaths = map[string][2]string{
	"/ui":             {"console/index.html", "text/html; charset=utf-8"},
	"/ui/":            {"console/index.html", "text/html; charset=utf-8"},
	"/ui/console.js":  {"console/console.js", "text/javascript; charset=utf-8"},
	"/ui/console.css": {"console/console.css", "text/css; charset=utf-8"},
	// A copy of docs/algorithms.svg (make pictures writes both; a test holds them equal).
	"/ui/algorithms.svg": {"console/algorithms.svg", "image/svg+xml"},
}

// consolePolicy is the Content-Security-Policy of the console's files: its own script and style
// sheet only, fetches to this origin only, no frames, no forms posted anywhere.
const consolePolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// isConsole reports whether path is the console's: /ui or below it.
func isConsole(path string) bool { return path == "/ui" || strings.HasPrefix(path, "/ui/") }

// console serves GET and HEAD of the console's files, without the token: they hold no data, and
// every call the page makes for data is an admin API request that needs it. Another path below /ui
// is a 404, another method a 405.
func (h *Handler) console(w http.ResponseWriter, r *http.Request) {
	file, ok := consolePaths[r.URL.Path]
	switch {
	case !ok:
		writeError(w, http.StatusNotFound, "no console file "+r.URL.Path)
		return
	case r.Method != http.MethodGet && r.Method != http.MethodHead:
		w.Header().Set("Allow", "GET, HEAD")
		writeError(w, http.StatusMethodNotAllowed, r.URL.Path+" answers GET and HEAD only")
		return
	}
	body, err := consoleFiles.ReadFile(file[0])
	if err != nil { // the files are embedded: only a broken build gets here
		writeError(w, http.StatusInternalServerError, "console file missing")
		return
	}
	hdr := w.Header()
	hdr.Set("Content-Type", file[1])
	hdr.Set("Content-Security-Policy", consolePolicy)
	hdr.Set("X-Content-Type-Options", "nosniff")
	hdr.Set("X-Frame-Options", "DENY")
	hdr.Set("Referrer-Policy", "no-referrer")
	hdr.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodGet {
		w.Write(body)
	}
}
