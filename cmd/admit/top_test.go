package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/admit-dev/admit/internal/redistest"
	"github.com/admit-dev/admit/transport/admin"
)

// topConfig has a policy of one request an hour and a sketch of size entries that reveals subjects.
const topConfig = `
server:
  top: {size: %d, reveal_subjects: true}
policies:
  - {name: tight, algorithm: fixed_window, limit: 1, window: 1h}
  - {name: idle, algorithm: fixed_window, limit: 100, window: 1h}
`

// topCmd runs "admit top args…" in this process and returns its exit code, stdout and stderr.
func topCmd(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(t.Context(), append([]string{"top"}, args...), &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// adminTop reads GET /v1/top?policy=tight from the admin API at base, as admit top does.
func adminTop(t *testing.T, base string) admin.TopResponse {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, base+"/v1/top?policy=tight", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testAdminToken)
	res, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	var top admin.TopResponse
	if err := json.Unmarshal(body, &top); res.StatusCode != http.StatusOK || err != nil {
		t.Fatalf("GET %s/v1/top = %d %s (%v)", base, res.StatusCode, body, err)
	}
	return top
}

// serveTop starts admit serve in this process with the admin API on and topConfig of size, and
// returns its data-plane and admin URLs.
func serveTop(t *testing.T, size int) (base, adminURL string) {
	t.Helper()
	config := filepath.Join(t.TempDir(), "admit.yaml")
	writeConfig(t, config, fmt.Sprintf(topConfig, size))
	base, logs, _ := serveInProcess(t, "--config", config, "--admin-listen", "127.0.0.1:0")
	return base, "http://" + logs.waitAdminAddr(t)
}

// rejectTimes sends subject's check of the tight policy to base 1+times times: one admitted, then
// times rejected.
func rejectTimes(t *testing.T, base, subject string, times int) {
	t.Helper()
	body := fmt.Sprintf(`{"policy":"tight","key":%q}`, subject)
	for i := range times + 1 {
		res, err := http.Post(base+"/v1/check", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if want := map[bool]int{true: 200, false: 429}[i == 0]; res.StatusCode != want {
			t.Fatalf("check %d of %s on %s: %d; want %d", i+1, subject, base, res.StatusCode, want)
		}
	}
}

// topRow matches a row of admit top's table: digest, rejected, error, instances, first and last
// seen, key.
var topRow = regexp.MustCompile(`(?m)^([0-9a-f]{32}) +(\d+) +(\d+) +(\d+) +(\S+) +(\S+) +(".*")$`)

// TestTopAcrossInstances runs two admit serve processes, each with its own admin API and sketch,
// rejects alice twice on A and three times on B and bob once on A, and checks that admit top
// asking both about tight prints one table: alice 5 from 2 instances, then bob 1, with the earliest
// first and the latest last rejection of the instances' own answers, and exact counts (no sketch
// full); without --policy, that table and the idle policy's, empty.
// Then the failures: one instance down (exit 1, the other's table), a wrong token, an unknown
// policy, a bad command line.
func TestTopAcrossInstances(t *testing.T) {
	useSecret(t)
	t.Setenv(adminTokenEnv, testAdminToken)
	baseA, adminA := serveTop(t, 10)
	baseB, adminB := serveTop(t, 10)
	rejectTimes(t, baseA, "alice", 2)
	rejectTimes(t, baseB, "alice", 3)
	rejectTimes(t, baseA, "bob", 1)
	topA, topB := adminTop(t, adminA), adminTop(t, adminB)

	code, out, errs := topCmd(t, "--admin", adminA+","+adminB, "--policy", "tight")
	if code != exitOK || errs != "" {
		t.Fatalf("admit top: exit %d, stderr %q; want 0\n%s", code, errs, out)
	}
	t.Logf("admit top:\n%s", out)
	for _, want := range []string{"policy tight: 2 of 2 instances answered; subjects listed: 2\n", "counts exact"} {
		if !strings.Contains(out, want) {
			t.Errorf("admit top lacks %q:\n%s", want, out)
		}
	}
	rows := topRow.FindAllStringSubmatch(out, -1)
	if len(rows) != 2 {
		t.Fatalf("admit top printed %d rows; want 2 (alice, bob):\n%s", len(rows), out)
	}
	if len(topA.Subjects) != 2 || len(topB.Subjects) != 1 {
		t.Fatalf("the instances' own answers: A %+v, B %+v; want alice and bob, alice", topA.Subjects, topB.Subjects)
	}
	aliceA, aliceB := topA.Subjects[0], topB.Subjects[0] // A lists alice (2) before bob (1)
	if aliceA.Key != "alice" || aliceB.Key != "alice" || aliceA.Digest != aliceB.Digest {
		t.Fatalf("the instances' own answers: A %+v, B %+v", topA.Subjects, topB.Subjects)
	}
	first := aliceA.FirstSeen
	if aliceB.FirstSeen.Before(first) {
		first = aliceB.FirstSeen
	}
	last := aliceA.LastSeen
	if aliceB.LastSeen.After(last) {
		last = aliceB.LastSeen
	}
	wantAlice := []string{aliceA.Digest, "5", "0", "2", first.UTC().Format(time.RFC3339), last.UTC().Format(time.RFC3339), `"alice"`}
	if got := rows[0][1:]; strings.Join(got, " ") != strings.Join(wantAlice, " ") {
		t.Errorf("alice's row: %q; want %q", got, wantAlice)
	}
	if got := rows[1]; got[2] != "1" || got[4] != "1" || got[7] != `"bob"` {
		t.Errorf("bob's row: %q; want 1 rejection from 1 instance", got[1:])
	}

	// Without --policy, every policy's table: tight's as above, then idle's, which rejected no one.
	code, every, errs := topCmd(t, "--admin", adminA+","+adminB)
	if code != exitOK || errs != "" || !strings.HasPrefix(every, out) ||
		!strings.HasSuffix(every, "\npolicy idle: 2 of 2 instances answered; subjects listed: 0\ncounts exact: no sketch replaced an entry and no list was cut\nno subject listed: none rejected in the sketches' period\n") {
		t.Errorf("admit top without --policy: exit %d, stderr %q, stdout:\n%s\nwant tight's table, then idle's, empty", code, errs, every)
	}

	closed := "http://" + redistest.ClosedPort(t)
	code, out, errs = topCmd(t, "--admin", adminA+", "+closed, "--policy", "tight", "-n", "1")
	if code != exitError || !strings.Contains(errs, "admit top: "+closed+": ") || !strings.Contains(out, "1 of 2 instances answered; subjects listed: 1\ncounts and bounds are those of the instances that answered") ||
		len(topRow.FindAllString(out, -1)) != 1 || !strings.Contains(out, "at most 2 (instances' bounds and cut lists)") {
		t.Errorf("admit top with one instance down, -n 1: exit %d, stdout %q, stderr %q; want 1, A's one subject, its cut list's bound 2 (alice's count), and the closed port named", code, out, errs)
	}
	for _, c := range []struct {
		args []string
		env  string
		code int
		err  string
	}{
		{[]string{"--admin", adminA, "--policy", "nope"}, testAdminToken, exitError, `admit top: ` + adminA + `: 404 Not Found: invalid request: unknown policy "nope"`},
		{[]string{"--admin", adminA + "," + adminB, "--policy", "tight"}, "wrong-token-5e1f9c2b7a3d0e84", exitError, adminB + ": 401 Unauthorized: unauthorized"},
		{[]string{"--admin", adminA, "--policy", "tight", "-n", "11"}, testAdminToken, exitError, "want 1-10 (server.top.size)"},
		{[]string{"--admin", adminA, "--policy", "tight", "-n", "0"}, testAdminToken, exitUsage, "-n 0; want at least 1"},
		{[]string{"--admin", adminA + ",", "--policy", "tight"}, testAdminToken, exitUsage, `--admin "": want http://host:port`},
		{[]string{"--admin", adminA, "--policy", "tight"}, "", exitUsage, "no admin token"},
	} {
		t.Setenv(adminTokenEnv, c.env)
		code, out, errs := topCmd(t, c.args...)
		if code != c.code || out != "" || !strings.Contains(errs, c.err) {
			t.Errorf("admit top %q with token %q: exit %d, stdout %q, stderr %q; want %d saying %q", c.args, c.env, code, out, errs, c.code, c.err)
		}
	}
	t.Setenv(adminTokenEnv, testAdminToken)
	if code, _, errs := stateCmd(t, "--admin", adminA+","+adminB, "--key", "alice"); code != exitUsage || !strings.Contains(errs, "want one URL") {
		t.Errorf("admit state with two --admin URLs: exit %d, stderr %q; want 2: it asks one instance", code, errs)
	}
}

// TestTopBounds merges answers of full sketches and cut lists: the over bound is the sum of the
// instances' error bounds, the under bound adds, per instance, the larger of its bound and the
// least count of a list cut at n.
func TestTopBounds(t *testing.T) {
	at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	s := func(d string, rejected, err uint64, first, last int) admin.TopSubject {
		return admin.TopSubject{Digest: d, Rejected: rejected, Error: err, FirstSeen: at.Add(time.Duration(first) * time.Second), LastSeen: at.Add(time.Duration(last) * time.Second)}
	}
	answers := []instanceTop{
		{base: "a", n: 2, top: admin.TopResponse{Size: 5, ErrorBound: 3, Subjects: []admin.TopSubject{s("x", 10, 3, 5, 9), s("y", 7, 0, 1, 2)}}},
		{base: "b", top: admin.TopResponse{Size: 5, ErrorBound: 0, Subjects: []admin.TopSubject{s("y", 4, 0, 0, 8)}}},
		{base: "c", n: 3, top: admin.TopResponse{Size: 5, ErrorBound: 2, Subjects: []admin.TopSubject{s("z", 12, 2, 3, 3)}}},
		{base: "d", err: fmt.Errorf("down")},
	}
	table, answered := mergeTops(answers)
	if answered != 3 || table.over != 5 || table.missing != 7+0+2 {
		t.Errorf("answered %d, over %d, missing %d; want 3, 3+0+2, 7 (a's cut list) + 0 + 2", answered, table.over, table.missing)
	}
	var got []string
	for _, m := range table.subjects {
		got = append(got, fmt.Sprintf("%s %d %d %d %d %d", m.Digest, m.Rejected, m.Error, m.instances, m.FirstSeen.Sub(at)/time.Second, m.LastSeen.Sub(at)/time.Second))
	}
	if want := []string{"z 12 2 1 3 3", "y 11 0 2 0 8", "x 10 3 1 5 9"}; strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("merged %q; want %q", got, want)
	}
}
