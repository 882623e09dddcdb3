package cli

import (
	"context"
	"io"
	"net/http"
	"sync"

	"k8s.io/client-go/rest"
)

// ExitInterrupted is the exit code after Ctrl-C (128 + SIGINT, as a shell
// reports a process the signal ended).
const ExitInterrupted = 130

// cancelRequestsOn makes every request of the clients built from cfg end
// when ctx does. client-go's discovery and RESTMapper take no context, and
// a request to a server that does not answer waits for its timeout (32 s
// for discovery): without this, Ctrl-C in main cancels the context and the
// command still sits there that long.
func cancelRequestsOn(ctx context.Context, cfg *rest.Config) *rest.Config {
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return &cancelingRoundTripper{ctx: ctx, next: rt}
	})
	return cfg
}

type cancelingRoundTripper struct {
	ctx  context.Context
	next http.RoundTripper
}

func (c *cancelingRoundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := c.ctx.Err(); err != nil {
		return nil, err
	}
	rctx, cancel := context.WithCancel(req.Context())
	stop := context.AfterFunc(c.ctx, cancel)
	release := func() {
		stop()
		cancel()
	}
	resp, err := c.next.RoundTrip(req.WithContext(rctx))
	if err != nil {
		release()
		return nil, err
	}
	// The request's context must live until its body is read (a watch
	// streams for as long as it runs).
	resp.Body = &releasingBody{ReadCloser: resp.Body, release: release}
	return resp, nil
}

// WrappedRoundTripper lets client-go's transport debugging see through.
func (c *cancelingRoundTripper) WrappedRoundTripper() http.RoundTripper { return c.next }

type releasingBody struct {
	io.ReadCloser
	once    sync.Once
	release func()
}

func (b *releasingBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(b.release)
	return err
}

// quietAfter drops what is written once ctx is done: after Ctrl-C a
// command that falls back to offline output (definitions, version) must
// not print it; the one line "error: interrupted" is the last word.
type quietAfter struct {
	ctx context.Context
	w   io.Writer
}

func (q quietAfter) Write(p []byte) (int, error) {
	if q.ctx.Err() != nil {
		return len(p), nil
	}
	return q.w.Write(p)
}

// Unwrap lets the colour decision see the terminal behind.
func (q quietAfter) Unwrap() io.Writer { return q.w }
