package localcluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/muster-io/muster/localcluster/operators"
)

// Operator is a running operator child process.
type Operator struct {
	Name string
	// LogPath is the file holding the operator's output (inside the control
	// plane's temp dir, so it goes away with Stop; read it before).
	LogPath string
	// WebhookConfigurations are the names of the registered webhook
	// configurations (mutating and validating).
	WebhookConfigurations []string

	cmd    *exec.Cmd
	exited chan struct{}
	stop   func()
}

// Stop deletes the operator's webhook configurations (left behind, their
// failurePolicy Fail would break every matching create), then stops the
// process: SIGTERM, and SIGKILL after five seconds.
func (o *Operator) Stop() { o.stop() }

// LogTail returns the last n lines of the operator's log, for failure
// messages.
func (o *Operator) LogTail(n int) string {
	b, err := os.ReadFile(o.LogPath)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// StartOperator builds (or reuses) the operator's binary and runs it against
// the control plane with no leader election and metrics off. An operator
// with webhooks gets its webhook server on 127.0.0.1:<free port> with a
// self-signed certificate and its webhook configurations registered by URL,
// health probes off, and StartOperator returns once that server accepts TLS
// connections. One without webhooks serves its health probe on that port
// instead, and StartOperator returns once /readyz answers. Install its CRDs
// first (InstallOperatorCRDs), ideally before StartControllers.
func StartOperator(ctx context.Context, cp *ControlPlane, name string) (*Operator, error) {
	return StartOperatorWith(ctx, cp, name, OperatorOptions{})
}

// OperatorOptions change how StartOperatorWith runs an operator.
type OperatorOptions struct {
	// Config is more of the operator's Configuration (a YAML mapping): its
	// top-level keys replace those of operator.yaml's config (whose other
	// keys stay, e.g. the controllers' concurrency the operator ships
	// with), and the result is merged into what StartOperator writes,
	// whose keys it may not set.
	Config string
}

// StartOperatorWith is StartOperator with options.
func StartOperatorWith(ctx context.Context, cp *ControlPlane, name string, opts OperatorOptions) (*Operator, error) {
	if err := cp.live(); err != nil {
		return nil, err
	}
	spec, _, err := operators.Get(name)
	if err != nil {
		return nil, err
	}
	bin, err := operators.Build(ctx, name)
	if err != nil {
		return nil, err
	}
	modDir, err := operators.ModuleDir(ctx, name)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(cp.Dir(), "operator-"+name+"-")
	if err != nil {
		return nil, err
	}
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	probe := "0"
	if spec.Webhooks == "" {
		// No webhook server to wait for: serve the health probe on the
		// port instead.
		probe = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	}
	if opts.Config != "" {
		over, err := overlayConfig(spec.Config, opts.Config)
		if err != nil {
			return nil, fmt.Errorf("operator %s: config: %w", name, err)
		}
		spec.Config = string(over)
	}
	configPath, caBundle, err := writeOperatorConfig(dir, name, spec, port, probe)
	if err != nil {
		return nil, err
	}
	args := spec.Command(operators.Run{Kubeconfig: cp.KubeconfigPath, Config: configPath, Probe: probe})
	o, err := startOperatorProcess(cp, name, bin, args, filepath.Join(dir, name+".log"))
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*Operator, error) {
		o.stop()
		return nil, fmt.Errorf("operator %s: %w\nlast log lines:\n%s", name, err, o.LogTail(20))
	}

	if spec.Webhooks == "" {
		if err := waitForHealthy(ctx, probe, o.exited); err != nil {
			return fail(err)
		}
		return o, nil
	}
	if err := waitForTLS(ctx, port, o.exited); err != nil {
		return fail(err)
	}
	names, err := registerWebhooks(ctx, cp, name, filepath.Join(modDir, spec.Webhooks), port, caBundle, spec.PodLabel)
	o.WebhookConfigurations = names
	if err != nil {
		return fail(err)
	}
	return o, nil
}

// writeOperatorConfig writes the operator's Configuration file into dir,
// for an operator with a configAPI (else it writes nothing and returns ""):
// no leader election, no metrics, the health probe on probe, and, with
// webhooks, the webhook server on 127.0.0.1:port with a self-signed
// certificate, whose chain it returns as the webhooks' CA bundle.
func writeOperatorConfig(dir, name string, spec operators.Spec, port int, probe string) (configPath string, caBundle []byte, err error) {
	if spec.ConfigAPI == "" {
		return "", nil, nil
	}
	certDir := filepath.Join(dir, "certs")
	webhook := ""
	if spec.Webhooks != "" {
		if caBundle, err = writeServingCert(certDir); err != nil {
			return "", nil, fmt.Errorf("operator %s: %w", name, err)
		}
		webhook = fmt.Sprintf("webhook: {host: 127.0.0.1, port: %d, certDir: %q}\n", port, certDir)
	}
	config := fmt.Sprintf(`apiVersion: %s
kind: Configuration
leaderElection: {leaderElect: false}
internalCertManagement: {enable: false}
metrics: {bindAddress: "0"}
health: {healthProbeBindAddress: %q}
`, spec.ConfigAPI, probe) + webhook
	merged, err := mergeConfig(config, spec.Config)
	if err != nil {
		return "", nil, fmt.Errorf("operator %s: config: %w", name, err)
	}
	configPath = filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(configPath, merged, 0o600); err != nil {
		return "", nil, err
	}
	return configPath, caBundle, nil
}

// twoMappings decodes two YAML mappings.
func twoMappings(a, b string) (ma, mb map[string]any, err error) {
	if err = yaml.Unmarshal([]byte(a), &ma); err != nil {
		return nil, nil, err
	}
	if err = yaml.Unmarshal([]byte(b), &mb); err != nil {
		return nil, nil, err
	}
	return ma, mb, nil
}

// overlayConfig returns base with each top-level key of over set to
// over's value.
func overlayConfig(base, over string) ([]byte, error) {
	b, o, err := twoMappings(base, over)
	if err != nil {
		return nil, err
	}
	if b == nil {
		b = map[string]any{}
	}
	maps.Copy(b, o)
	return yaml.Marshal(b)
}

// mergeConfig adds the keys of the YAML mapping extra to those of base; a
// key in both is an error (base holds what the harness must decide).
func mergeConfig(base, extra string) ([]byte, error) {
	b, e, err := twoMappings(base, extra)
	if err != nil {
		return nil, err
	}
	for k, v := range e {
		if _, ok := b[k]; ok {
			return nil, fmt.Errorf("%s: set by the harness (leader election, certificates, metrics, probe and webhook server are its)", k)
		}
		b[k] = v
	}
	return yaml.Marshal(b)
}

// startOperatorProcess runs bin with args, its output in logPath, and
// registers its Stop with the control plane.
func startOperatorProcess(cp *ControlPlane, name, bin string, args []string, logPath string) (*Operator, error) {
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	setPdeathsig(cmd)
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start operator %s: %w", name, err)
	}
	o := &Operator{Name: name, LogPath: logPath, cmd: cmd, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		logFile.Close()
		close(o.exited)
	}()
	o.stop = sync.OnceFunc(func() {
		// Webhooks first: while they exist, a stopped operator makes
		// every matching create fail.
		for _, wh := range o.WebhookConfigurations {
			deleteWebhookConfiguration(cp, wh)
		}
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-o.exited:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-o.exited
		}
	})
	cp.OnStop("operator "+name, o.stop)
	return o, nil
}

// FreePort returns a TCP port that was free on 127.0.0.1 a moment ago, for
// a child process or server that must be told its port up front.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// writeServingCert writes tls.crt and tls.key for 127.0.0.1 into dir and
// returns the certificate chain, which is the CA bundle for the webhooks.
func writeServingCert(dir string) ([]byte, error) {
	crt, key, err := LoopbackServingCert()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.crt"), crt, 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.key"), key, 0o600); err != nil {
		return nil, err
	}
	return crt, nil
}

// waitForTLS waits until something accepts TLS on 127.0.0.1:port.
func waitForTLS(ctx context.Context, port int, exited <-chan struct{}) error {
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	return WaitFor(ctx, ShortTimeout, "webhook server on "+addr, func(context.Context) (bool, string, error) {
		select {
		case <-exited:
			return false, "", errors.New("process exited")
		default:
		}
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // only probing that the port serves TLS
		if err != nil {
			return false, err.Error(), nil
		}
		conn.Close()
		return true, "", nil
	})
}

// waitForHealthy waits until the controller-runtime health probe at addr
// answers /readyz with 200: the manager has started. Its controllers may
// still be syncing caches; objects created meanwhile are reconciled once
// they have.
func waitForHealthy(ctx context.Context, addr string, exited <-chan struct{}) error {
	client := &http.Client{Timeout: time.Second}
	url := "http://" + addr + "/readyz"
	return WaitFor(ctx, ShortTimeout, "health probe "+url, func(ctx context.Context) (bool, string, error) {
		select {
		case <-exited:
			return false, "", errors.New("process exited")
		default:
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false, "", err
		}
		resp, err := client.Do(req)
		if err != nil {
			return false, err.Error(), nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, resp.Status, nil
	})
}
