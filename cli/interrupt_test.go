package cli

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// TestInterruptEndsPromptly: Ctrl-C (main cancels the context on SIGINT)
// while a command waits on a server that does not answer ends the command
// at once, with one error line, whatever step it is in: discovery, the
// definitions, the workload, or its pods.
func TestInterruptEndsPromptly(t *testing.T) {
	release := make(chan struct{})
	arrived := make(chan struct{}, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case arrived <- struct{}{}:
		default:
		}
		select { // hang until the test ends or the client goes away
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	for _, args := range [][]string{
		{"describe", "jobset/x", "-n", "a"},
		{"get", "-A"},
		{"fit", "jobset/x", "-n", "a"},
		{"definitions"},
		{"version"},
	} {
		t.Run(args[0], func(t *testing.T) {
			var out, errOut bytes.Buffer
			env := NewEnv(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
			env.Getenv = func(string) string { return "" }
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan int, 1)
			go func() {
				done <- Run(ctx, env, append([]string{"--server", srv.URL, "--cache-dir", t.TempDir()}, args...))
			}()
			select { // interrupt once it waits on the server
			case <-arrived:
			case code := <-done:
				t.Fatalf("ended (exit %d, %s) before asking the server", code, errOut.String())
			case <-time.After(10 * time.Second):
				t.Fatal("no request reached the server in 10 s")
			}
			cancel()
			start := time.Now()
			// Without the interrupt reaching the requests, the command
			// waits for the client timeout (30 s; 32 s in discovery).
			select {
			case code := <-done:
				t.Logf("muster %s: exit %d %v after the interrupt", strings.Join(args, " "), code, time.Since(start))
				if code != ExitInterrupted || errOut.String() != "error: interrupted\n" || out.Len() != 0 {
					t.Errorf("exit %d, stdout %q, stderr %q; want exit %d, nothing on stdout, one line \"error: interrupted\"",
						code, out.String(), errOut.String(), ExitInterrupted)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("still running 10 s after the interrupt")
			}
		})
	}
}

// TestInterruptChildProcess sends a real SIGINT to a child process that
// runs Main as cmd/muster does, while it waits on a server that never
// answers: the child ends with exit 130 and prints nothing but
// "error: interrupted" (no client-go log line, no partial output).
func TestInterruptChildProcess(t *testing.T) {
	if os.Getenv("MUSTER_TEST_SIGINT_CHILD") != "" {
		// The child: cmd/muster's main.
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
		code := Main(ctx, strings.Split(os.Getenv("MUSTER_TEST_SIGINT_CHILD"), " "), genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr})
		stop()
		os.Exit(code)
	}
	release := make(chan struct{})
	arrived := make(chan struct{}, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case arrived <- struct{}{}:
		default:
		}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)

	cmd := exec.Command(os.Args[0], "-test.run=^TestInterruptChildProcess$")
	cmd.Env = append(os.Environ(), "MUSTER_TEST_SIGINT_CHILD=--server "+srv.URL+" --cache-dir "+t.TempDir()+" describe jobset/x -n a")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-arrived:
	case err := <-done:
		t.Fatalf("child ended (%v) before asking the server: %s%s", err, out.String(), errOut.String())
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("no request of the child reached the server in 30 s")
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	select {
	case err := <-done:
		t.Logf("child ended %v after SIGINT", time.Since(start))
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != ExitInterrupted {
			t.Errorf("child ended with %v; want exit %d", err, ExitInterrupted)
		}
		if out.Len() != 0 || errOut.String() != "error: interrupted\n" {
			t.Errorf("child printed stdout %q, stderr %q; want only \"error: interrupted\" on stderr", out.String(), errOut.String())
		}
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("child still running 10 s after SIGINT")
	}
}
