package localcluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"time"

	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/client-go/rest"
)

// Restarting the kube-apiserver of a control plane started with
// Options.Restartable.
//
// The upstream test server cannot come back where it was, for three reasons
// a client would notice: it listens on a fresh 127.0.0.1:0 listener made
// before it parses its flags (--secure-port does not pin it); its client
// config trusts a loopback certificate generated in memory at each start;
// and it authenticates with a loopback token generated at each start. A
// client built for one instance is refused by the next on all three counts,
// and clients cannot be rebuilt by hand — the components under test hold
// theirs. So a restartable control plane gives its clients what outlives an
// instance:
//
//   - an address: a TCP proxy on a fixed loopback port that forwards each
//     connection to the instance of the moment. TLS runs end to end between
//     client and apiserver; the proxy copies bytes. When the instance stops
//     it cuts every connection (as a dying process would) and refuses new
//     ones until the next instance is up;
//   - a serving certificate: --cert-dir is a directory of the control plane,
//     so the first instance writes its self-signed pair there and every
//     later one serves the same; clients trust that certificate;
//   - an identity: --token-auth-file holds a static token in system:masters,
//     which clients send instead of the loopback token.
//
// etcd keeps running, so every instance serves the same data (the storage
// prefix is the control plane's).

// restartAdminUser is the user the static token authenticates as.
const restartAdminUser = "muster-harness-admin"

// apiRestarter starts, stops and restarts the apiserver behind the proxy.
type apiRestarter struct {
	tb      *processTB
	flags   []string
	storage *storagebackend.Config
	proxy   *apiProxy

	mu sync.Mutex
	// teardown stops the running instance; nil while none runs.
	teardown func()
	closed   bool
}

// startRestartableAPIServer starts the first instance and builds the client
// config every later instance accepts too.
func (cp *ControlPlane) startRestartableAPIServer(flags []string, sc *storagebackend.Config) error {
	dir := filepath.Join(cp.dir, "apiserver")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("apiserver dir: %w", err)
	}
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return fmt.Errorf("admin token: %w", err)
	}
	token := hex.EncodeToString(secret)
	tokenFile := filepath.Join(dir, "tokens.csv")
	// token,user,uid,group
	line := fmt.Sprintf("%s,%s,%s,%s\n", token, restartAdminUser, restartAdminUser, user.SystemPrivilegedGroup)
	if err := os.WriteFile(tokenFile, []byte(line), 0o600); err != nil {
		return fmt.Errorf("token file: %w", err)
	}
	proxy, err := newAPIProxy()
	if err != nil {
		return err
	}
	r := &apiRestarter{
		tb: cp.tb,
		// After the caller's flags: the last of a name wins.
		flags:   append(append([]string{}, flags...), "--cert-dir="+dir, "--token-auth-file="+tokenFile),
		storage: sc,
		proxy:   proxy,
	}
	cp.restart = r
	// Registered first, so it runs last: after every instance's teardown.
	cp.tb.Cleanup(proxy.close)
	base, err := r.start()
	if err != nil {
		return err
	}
	// The pair name is the apiserver's default, "apiserver".
	ca, err := os.ReadFile(filepath.Join(dir, "apiserver.crt"))
	if err != nil {
		return fmt.Errorf("serving certificate: %w", err)
	}
	cfg := rest.CopyConfig(base)
	cfg.Host = "https://" + proxy.addr()
	cfg.BearerToken = token
	// The serving certificate names 127.0.0.1, where the proxy listens.
	cfg.TLSClientConfig = rest.TLSClientConfig{CAData: ca}
	cp.RestConfig = cfg
	return nil
}

// start starts an instance and routes the proxy to it; it returns the
// instance's own client config. Call with r.mu held, or before anyone else
// can reach r.
func (r *apiRestarter) start() (*rest.Config, error) {
	ts, err := startTestServer(r.tb, r.flags, r.storage)
	if err != nil {
		return nil, err
	}
	r.teardown = ts.TearDownFn
	// Registered after the instance's own cleanups (its context, feature
	// gates), so that Stop tears it down before those run.
	r.tb.Cleanup(r.shutdown)
	u, err := url.Parse(ts.ClientConfig.Host)
	if err != nil {
		return nil, fmt.Errorf("kube-apiserver address %q: %w", ts.ClientConfig.Host, err)
	}
	r.proxy.route(u.Host)
	return ts.ClientConfig, nil
}

// stop cuts every client connection, refuses new ones and stops the
// running instance. Call with r.mu held.
func (r *apiRestarter) stop() {
	r.proxy.route("")
	if r.teardown != nil {
		r.teardown()
		r.teardown = nil
	}
}

// shutdown stops the instance for good (Stop of the control plane).
func (r *apiRestarter) shutdown() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	r.stop()
}

// RestartAPIServer stops the kube-apiserver, leaves it down for downtime and
// starts a new instance on the same etcd, behind the same address, with the
// same certificate and admin token: every client config of the control plane
// (RestConfig, JSONConfig, the kubeconfig file) stays valid, and clients
// see what they would see of a real restart — their connections cut, then
// refused, then a fresh apiserver. It returns once the new instance is
// healthy. ctx only cuts the downtime short: the apiserver always comes
// back. The control plane must have been started with Options.Restartable.
func (cp *ControlPlane) RestartAPIServer(ctx context.Context, downtime time.Duration) error {
	if err := cp.live(); err != nil {
		return err
	}
	r := cp.restart
	if r == nil {
		return errors.New("RestartAPIServer: the control plane was not started with Options.Restartable")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return errStopped
	}
	r.stop()
	t := time.NewTimer(downtime)
	select {
	case <-ctx.Done():
	case <-t.C:
	}
	t.Stop()
	if _, err := r.start(); err != nil {
		return fmt.Errorf("restart kube-apiserver: %w", err)
	}
	return nil
}

// apiProxy forwards the TCP connections made to one loopback address to the
// apiserver instance of the moment.
type apiProxy struct {
	ln net.Listener

	mu sync.Mutex
	// backend is the instance's host:port; "" while none runs.
	backend string
	// epoch changes with every route: a connection dialled for an older
	// backend is dropped.
	epoch  uint64
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

func newAPIProxy() (*apiProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("apiserver proxy: %w", err)
	}
	p := &apiProxy{ln: ln, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.serve()
	return p, nil
}

func (p *apiProxy) addr() string { return p.ln.Addr().String() }

// route sends new connections to backend ("": refuse them) and cuts every
// open one.
func (p *apiProxy) route(backend string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.backend = backend
	p.epoch++
	for c := range p.conns {
		abort(c)
	}
	clear(p.conns)
}

func (p *apiProxy) close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.route("")
	_ = p.ln.Close()
	p.wg.Wait()
}

func (p *apiProxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.forward(c)
		}()
	}
}

func (p *apiProxy) forward(client net.Conn) {
	p.mu.Lock()
	backend, epoch := p.backend, p.epoch
	p.mu.Unlock()
	if backend == "" {
		abort(client) // as a port nobody listens on: refused
		return
	}
	server, err := net.DialTimeout("tcp", backend, 5*time.Second)
	if err != nil {
		abort(client)
		return
	}
	p.mu.Lock()
	if p.closed || p.epoch != epoch {
		p.mu.Unlock()
		abort(client)
		abort(server)
		return
	}
	p.conns[client], p.conns[server] = struct{}{}, struct{}{}
	p.mu.Unlock()

	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		done <- struct{}{}
	}
	go pipe(server, client)
	go pipe(client, server)
	// Either side ending ends both: HTTP over TLS needs no half-close.
	<-done
	_ = client.Close()
	_ = server.Close()
	<-done
	p.mu.Lock()
	delete(p.conns, client)
	delete(p.conns, server)
	p.mu.Unlock()
}

// abort closes c with a reset rather than an orderly close, as the kernel
// does for the sockets of a killed process with data in flight.
func abort(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}
