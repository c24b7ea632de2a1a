package main

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/admit-dev/admit/internal/redistest"
)

// TestE2EStalledStderr runs the admit binary with its stderr a pipe that nobody reads once the
// server is listening, filled to the brim, and with Redis unreachable: every /demo request is
// answered 503, and SIGTERM still makes it exit 0. Filling the pipe takes a second open file
// description of it (through /proc, so Linux only) that, unlike the child's, does not block.
func TestE2EStalledStderr(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cmd := exec.Command(admitBinary(t), "serve", "--listen", "127.0.0.1:0", "--redis", "redis://"+redistest.ClosedPort(t))
	cmd.Env = admitEnv(secretEnv + "=" + testSecret)
	cmd.Stderr = w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	var waitErr error
	go func() {
		waitErr = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		select {
		case <-exited:
		default:
			cmd.Process.Kill()
			<-exited
		}
	})
	filler, err := syscall.Open("/proc/self/fd/"+strconv.Itoa(int(w.Fd())), syscall.O_WRONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		t.Skipf("cannot reopen the pipe through /proc: %v", err)
	}
	defer syscall.Close(filler)
	w.Close() // the child has its own

	// Read the log up to the listening line, then never again.
	lines := bufio.NewReader(r)
	addr := make(chan string, 1)
	var before bytes.Buffer
	go func() {
		for {
			line, err := lines.ReadString('\n')
			before.WriteString(line)
			if m := listeningRE.FindStringSubmatch(line); m != nil {
				addr <- m[1]
				return
			}
			if err != nil {
				close(addr)
				return
			}
		}
	}()
	var base string
	select {
	case a, ok := <-addr:
		if !ok {
			t.Fatalf("admit exited before listening; its log:\n%s", before.String())
		}
		base = "http://" + a
	case <-time.After(10 * time.Second):
		t.Fatal("admit did not log its address within 10s")
	}
	t.Logf("log before the stall:\n%s", before.String())

	filled := fillPipe(t, filler)
	t.Logf("pipe filled with %d bytes", filled)

	for i := range 200 {
		if r := get(t, base+"/demo"); r.status != http.StatusServiceUnavailable {
			t.Fatalf("request %d: GET /demo = %d, want 503", i+1, r.status)
		}
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
	case <-time.After(15 * time.Second):
		t.Fatal("admit did not exit within 15s of SIGTERM with stderr stalled")
	}
	var exit *exec.ExitError
	if errors.As(waitErr, &exit) {
		t.Errorf("exit code %d after SIGTERM, want 0", exit.ExitCode())
	} else if waitErr != nil {
		t.Fatal(waitErr)
	}

	// The stall was real: after the filler, the pipe holds nothing the child wrote.
	syscall.Close(filler)
	filler = -1
	rest, err := io.ReadAll(lines)
	if err != nil {
		t.Fatal(err)
	}
	if len(rest) != filled || len(bytes.Trim(rest, "x")) != 0 {
		t.Errorf("read %d bytes after the listening line, want exactly the %d filler bytes", len(rest), filled)
	}
}

// fillPipe writes to the non-blocking fd until the pipe is full, and returns the bytes written.
func fillPipe(t *testing.T, fd int) int {
	t.Helper()
	total := 0
	for _, size := range []int{4096, 1} {
		chunk := bytes.Repeat([]byte("x"), size)
		for {
			n, err := syscall.Write(fd, chunk)
			if n > 0 {
				total += n
			}
			if errors.Is(err, syscall.EAGAIN) {
				break
			}
			if err != nil {
				t.Fatalf("filling the pipe: %v", err)
			}
		}
	}
	return total
}
