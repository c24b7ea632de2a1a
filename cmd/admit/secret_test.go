package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/admit-dev/admit/internal/redistest"
	"github.com/admit-dev/admit/internal/syncbuf"
)

// The tests here check where admit serve finds its HMAC secret, when it refuses to start for want
// of one, and that it never logs it.

// Secrets distinct from testSecret and from each other, so a test can tell which one made a key.
const (
	envSecret  = "env-secret-5d8c1f0a9e7b"
	fileSecret = "file-secret-3b6e2a4c8d1f"
)

// secretFile writes content to a new file in t's temporary directory and returns its path.
func secretFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestServeSecretSource runs admit serve on Redis with the secret in the environment, in a file, or
// in both, and checks that the one key in Redis is the demo key a KeyBuilder makes with the secret
// that should win: the file's, less one trailing newline, over the environment's.
func TestServeSecretSource(t *testing.T) {
	s := redistest.Start(t)
	for _, tc := range []struct {
		name       string
		env        string  // ADMIT_HMAC_SECRET
		file       *string // the content of --hmac-secret-file; nil for no flag
		want       string  // the secret that makes the key
		wantSource string
	}{
		{name: "environment", env: envSecret, want: envSecret, wantSource: "ADMIT_HMAC_SECRET"},
		{name: "file", file: ptr(fileSecret + "\n"), want: fileSecret, wantSource: "--hmac-secret-file"},
		{name: "file without a newline", file: ptr(fileSecret), want: fileSecret, wantSource: "--hmac-secret-file"},
		{name: "file with CRLF", file: ptr(fileSecret + "\r\n"), want: fileSecret, wantSource: "--hmac-secret-file"},
		{name: "file with two newlines", file: ptr(fileSecret + "\n\n"), want: fileSecret + "\n", wantSource: "--hmac-secret-file"},
		{name: "file ending in CR", file: ptr(fileSecret + "\r"), want: fileSecret + "\r", wantSource: "--hmac-secret-file"},
		{name: "file beats environment", env: envSecret, file: ptr(fileSecret + "\n"), want: fileSecret, wantSource: "--hmac-secret-file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s.Do(t, "FLUSHALL")
			t.Setenv(secretEnv, tc.env)
			t.Setenv("REDIS_URL", "")
			args := []string{"--redis", s.URL()}
			if tc.file != nil {
				args = append(args, "--"+secretFileFlag, secretFile(t, *tc.file))
			}
			base, logs, stop := serveInProcess(t, args...)
			checkDemo(t, base, 200)
			if code := stop(); code != exitOK {
				t.Errorf("run = %d, want %d", code, exitOK)
			}
			want := demoKey(t, tc.want)
			if keys, err := s.Do(t, "KEYS", "*").AsStrSlice(); err != nil || !slices.Equal(keys, []string{want}) {
				t.Errorf("KEYS * = %q, %v; want only %s", keys, err, want)
			}
			if line := `msg="HMAC secret" source=` + tc.wantSource; !strings.Contains(logs.String(), line) {
				t.Errorf("the log lacks %q:\n%s", line, logs)
			}
			noSecretIn(t, logs.String(), envSecret, fileSecret)
		})
	}
}

func ptr(s string) *string { return &s }

// TestServeSecretRefused checks that admit serve refuses to start, with exit 2 and a message that
// says why and never holds the secret, without a secret on Redis, and with a secret it cannot use
// on either backend.
func TestServeSecretRefused(t *testing.T) {
	closed := "redis://" + redistest.ClosedPort(t)
	noSecret := []string{`msg="no usable HMAC secret"`, "no HMAC secret", "set ADMIT_HMAC_SECRET or --hmac-secret-file PATH", "every instance"}
	const short = "fifteen-bytes!!" // bound.MinSecretLen - 1
	for _, tc := range []struct {
		name     string
		env      string // ADMIT_HMAC_SECRET
		redisEnv string // REDIS_URL
		args     []string
		want     []string // in stderr
	}{{
		name: "--redis without a secret",
		args: []string{"--redis", closed},
		want: noSecret,
	}, {
		name:     "REDIS_URL without a secret",
		redisEnv: closed,
		want:     noSecret,
	}, {
		name: "short secret in the environment, memory",
		env:  short,
		want: []string{"the HMAC secret from ADMIT_HMAC_SECRET is 15 bytes; want at least 16"},
	}, {
		name: "short secret in the environment, Redis",
		env:  short,
		args: []string{"--redis", closed},
		want: []string{"the HMAC secret from ADMIT_HMAC_SECRET is 15 bytes; want at least 16"},
	}, {
		name: "short secret in a file, with its newline 16 bytes",
		args: []string{"--hmac-secret-file", secretFile(t, short+"\n")},
		want: []string{"the HMAC secret from --hmac-secret-file is 15 bytes; want at least 16"},
	}, {
		name: "short secret in a file, a good one in the environment",
		env:  testSecret,
		args: []string{"--hmac-secret-file", secretFile(t, short)},
		want: []string{"the HMAC secret from --hmac-secret-file is 15 bytes"},
	}, {
		name: "empty file",
		args: []string{"--hmac-secret-file", secretFile(t, "\n")},
		want: []string{"the HMAC secret from --hmac-secret-file is 0 bytes"},
	}, {
		name: "missing file",
		env:  testSecret,
		args: []string{"--hmac-secret-file", filepath.Join(t.TempDir(), "missing")},
		want: []string{"--hmac-secret-file: open ", "no such file"},
	}, {
		name: "a directory",
		args: []string{"--hmac-secret-file", t.TempDir()},
		want: []string{"--hmac-secret-file: read ", "is a directory"},
	}, {
		name: "empty path",
		env:  testSecret,
		args: []string{"--hmac-secret-file", ""},
		want: []string{"--hmac-secret-file: empty path"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(secretEnv, tc.env)
			t.Setenv("REDIS_URL", tc.redisEnv)
			var stderr syncbuf.Buffer
			// Should admit serve start after all, it stops at the deadline, and the test fails.
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			code := run(ctx, append([]string{"serve", "--listen", "127.0.0.1:0"}, tc.args...), io.Discard, &stderr)
			t.Logf("exit %d, stderr:\n%s", code, stderr.String())
			if code != exitUsage {
				t.Errorf("exit %d, want %d", code, exitUsage)
			}
			for _, s := range tc.want {
				if !strings.Contains(stderr.String(), s) {
					t.Errorf("stderr lacks %q", s)
				}
			}
			if strings.Contains(stderr.String(), "msg=listening") {
				t.Error("admit serve listened")
			}
			noSecretIn(t, stderr.String(), tc.env, short)
		})
	}
}

// TestServeRandomSecret checks that admit serve in memory, without a secret, starts with a random
// one of its own and says so.
func TestServeRandomSecret(t *testing.T) {
	t.Setenv(secretEnv, "")
	t.Setenv("REDIS_URL", "")
	base, logs, stop := serveInProcess(t)
	checkDemo(t, base, 200, 200, 200, 429)
	if code := stop(); code != exitOK {
		t.Errorf("run = %d, want %d", code, exitOK)
	}
	for _, s := range []string{`level=INFO msg="HMAC secret" source=random note="a random secret of this process only; `, "backend=memory"} {
		if !strings.Contains(logs.String(), s) {
			t.Errorf("the log lacks %q:\n%s", s, logs)
		}
	}
}
