package localcluster

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/cert"
	"sigs.k8s.io/yaml"
)

// Real operators run as child processes, each built from a small module of
// its own under localcluster/operators/<name> (its own go.mod pins the operator and
// the Kubernetes libraries it was released with; the project module could
// not build them). CRDs and webhook manifests are read from the operator's
// module in the module cache, so they always match the binary.
type operatorSpec struct {
	module      string // module path required by localcluster/operators/<name>/go.mod
	mainPackage string
	crdDir      string // CRD YAML directory inside the module
	// webhooks is the kubebuilder webhook manifest inside the module; empty
	// for an operator that runs without webhooks, which is then ready once
	// its health probe answers.
	webhooks  string
	configAPI string // apiVersion of the operator's Configuration file; empty: none
	// podLabel: the operator's pod webhooks only see pods carrying this
	// label (the upstream kustomize patches add that objectSelector).
	podLabel string
	// flags returns the command line for the control plane's kubeconfig,
	// the Configuration file (empty without configAPI) and the health probe
	// address ("0" for operators with webhooks). Operators name these flags
	// differently, and every one must turn off leader election, metrics and
	// probes on fixed ports.
	flags func(kubeconfig, config, probe string) []string
}

// configFileFlags are the flags of the kubebuilder-style operators that
// read a Configuration file.
func configFileFlags(kubeconfig, config, probe string) []string {
	return []string{
		"--kubeconfig=" + kubeconfig, "--config=" + config,
		"--metrics-bind-address=0", "--health-probe-bind-address=" + probe,
	}
}

var operators = map[string]operatorSpec{
	"jobset": {
		module: "sigs.k8s.io/jobset", mainPackage: "sigs.k8s.io/jobset",
		crdDir: "config/components/crd/bases", webhooks: "config/components/webhook/manifests.yaml",
		configAPI: "config.jobset.x-k8s.io/v1alpha1", podLabel: "jobset.sigs.k8s.io/jobset-name",
		flags: configFileFlags,
	},
	"lws": {
		module: "sigs.k8s.io/lws", mainPackage: "sigs.k8s.io/lws/cmd",
		crdDir: "config/crd/bases", webhooks: "config/webhook/manifests.yaml",
		configAPI: "config.lws.x-k8s.io/v1alpha1", podLabel: "leaderworkerset.sigs.k8s.io/name",
		flags: func(kubeconfig, config, probe string) []string {
			// LWS elects a leader unless told not to.
			return append(configFileFlags(kubeconfig, config, probe), "--leader-elect=false")
		},
	},
	"kuberay": {
		module:      "github.com/ray-project/kuberay/ray-operator",
		mainPackage: "github.com/ray-project/kuberay/ray-operator",
		crdDir:      "config/crd/bases",
		// KubeRay serves its (validation-only) RayCluster webhook only when
		// ENABLE_WEBHOOKS=true; its default install runs without, and so
		// does the localcluster. Flags instead of a Configuration file: with
		// --config, KubeRay ignores every other flag.
		flags: func(kubeconfig, _, probe string) []string {
			return []string{
				"--kubeconfig=" + kubeconfig, "--metrics-addr=0",
				"--health-probe-bind-address=" + probe,
				// Defaults to true.
				"--enable-leader-election=false",
			}
		},
	},
}

// Operators lists the operators StartOperator can run.
func Operators() []string {
	names := make([]string, 0, len(operators))
	for n := range operators {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func operator(name string) (operatorSpec, string, error) {
	spec, ok := operators[name]
	if !ok {
		return spec, "", fmt.Errorf("unknown operator %q (have %s)", name, strings.Join(Operators(), ", "))
	}
	_, file, _, ok := runtime.Caller(0)
	if !ok || !filepath.IsAbs(file) {
		return spec, "", fmt.Errorf("operator %s: cannot locate localcluster/operators (built with -trimpath?)", name)
	}
	dir := filepath.Join(filepath.Dir(file), "operators", name)
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		return spec, "", fmt.Errorf("operator %s: %w", name, err)
	}
	return spec, dir, nil
}

// goCmd runs the go command in dir and returns its stdout.
func goCmd(ctx context.Context, dir string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	// The operator modules are separate modules: never let a go.work or
	// the caller's GOFLAGS (say -mod=vendor) redirect them.
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go %s (in %s): %w\n%s", strings.Join(args, " "), dir, err, stderr.String())
	}
	return out, nil
}

// OperatorModuleDir returns the operator's module directory in the module
// cache, downloading it if needed.
func OperatorModuleDir(ctx context.Context, name string) (string, error) {
	spec, dir, err := operator(name)
	if err != nil {
		return "", err
	}
	out, err := goCmd(ctx, dir, "mod", "download", "-json", spec.module)
	if err != nil {
		return "", err
	}
	var m struct{ Dir, Error string }
	if err := json.Unmarshal(out, &m); err != nil {
		return "", fmt.Errorf("go mod download %s: %w", spec.module, err)
	}
	if m.Error != "" || m.Dir == "" {
		return "", fmt.Errorf("go mod download %s: %s", spec.module, m.Error)
	}
	return m.Dir, nil
}

// InstallOperatorCRDs installs the CRDs the operator's module ships.
func (cp *ControlPlane) InstallOperatorCRDs(ctx context.Context, name string) error {
	spec, _, err := operator(name)
	if err != nil {
		return err
	}
	modDir, err := OperatorModuleDir(ctx, name)
	if err != nil {
		return err
	}
	files, err := filepath.Glob(filepath.Join(modDir, spec.crdDir, "*.yaml"))
	if err != nil || len(files) == 0 {
		return fmt.Errorf("operator %s: no CRDs in %s (%v)", name, filepath.Join(modDir, spec.crdDir), err)
	}
	for _, f := range files {
		if err := cp.InstallCRDFile(ctx, f); err != nil {
			return fmt.Errorf("operator %s: %w", name, err)
		}
	}
	return nil
}

var buildMu sync.Mutex

// BuildOperator builds the operator's binary once and caches it under
// os.UserCacheDir()/muster-operators, keyed by a hash of the operator
// module's go.mod and go.sum, so later runs reuse it. A cold build takes
// about two minutes per operator on two cores.
func BuildOperator(ctx context.Context, name string) (string, error) {
	spec, dir, err := operator(name)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	for _, f := range []string{"go.mod", "go.sum"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			return "", fmt.Errorf("operator %s: %w", name, err)
		}
		h.Write(b)
	}
	h.Write([]byte(runtime.Version()))
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	bin := filepath.Join(cache, "muster-operators", name+"-"+hex.EncodeToString(h.Sum(nil))[:16], name)
	buildMu.Lock()
	defer buildMu.Unlock()
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		return "", err
	}
	// Build beside the target and rename, so a concurrent or interrupted
	// build never leaves a half-written binary at the cached path.
	tmp := bin + ".tmp-" + strconv.Itoa(os.Getpid())
	defer os.Remove(tmp)
	if _, err := goCmd(ctx, dir, "build", "-o", tmp, spec.mainPackage); err != nil {
		return "", fmt.Errorf("build operator %s: %w", name, err)
	}
	if err := os.Rename(tmp, bin); err != nil {
		return "", err
	}
	return bin, nil
}

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
	if err := cp.live(); err != nil {
		return nil, err
	}
	spec, _, err := operator(name)
	if err != nil {
		return nil, err
	}
	bin, err := BuildOperator(ctx, name)
	if err != nil {
		return nil, err
	}
	modDir, err := OperatorModuleDir(ctx, name)
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
	var configPath string
	var caBundle []byte
	probe := "0"
	if spec.webhooks == "" {
		// No webhook server to wait for: serve the health probe on the
		// port instead.
		probe = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	}
	if spec.configAPI != "" {
		certDir := filepath.Join(dir, "certs")
		webhook := ""
		if spec.webhooks != "" {
			if caBundle, err = writeServingCert(certDir); err != nil {
				return nil, fmt.Errorf("operator %s: %w", name, err)
			}
			webhook = fmt.Sprintf("webhook: {host: 127.0.0.1, port: %d, certDir: %q}\n", port, certDir)
		}
		config := fmt.Sprintf(`apiVersion: %s
kind: Configuration
leaderElection: {leaderElect: false}
internalCertManagement: {enable: false}
metrics: {bindAddress: "0"}
health: {healthProbeBindAddress: %q}
`, spec.configAPI, probe) + webhook
		configPath = filepath.Join(dir, "config.yaml")
		if err := os.WriteFile(configPath, []byte(config), 0o600); err != nil {
			return nil, err
		}
	}
	logPath := filepath.Join(dir, name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	args := spec.flags(cp.KubeconfigPath, configPath, probe)
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
	fail := func(err error) (*Operator, error) {
		o.stop()
		return nil, fmt.Errorf("operator %s: %w\nlast log lines:\n%s", name, err, o.LogTail(20))
	}

	if spec.webhooks == "" {
		if err := waitForHealthy(ctx, probe, o.exited); err != nil {
			return fail(err)
		}
		return o, nil
	}
	if err := waitForTLS(ctx, port, o.exited); err != nil {
		return fail(err)
	}
	names, err := registerWebhooks(ctx, cp, name, filepath.Join(modDir, spec.webhooks), port, caBundle, spec.podLabel)
	o.WebhookConfigurations = names
	if err != nil {
		return fail(err)
	}
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
	crt, key, err := cert.GenerateSelfSignedCertKey("127.0.0.1", []net.IP{net.ParseIP("127.0.0.1")}, nil)
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

// registerWebhooks creates the operator's webhook configurations from its
// kubebuilder manifest, pointed at url https://127.0.0.1:port<path> instead
// of a Service, named <operator>-<name>, with pod webhooks limited to pods
// carrying podLabel.
func registerWebhooks(ctx context.Context, cp *ControlPlane, op, manifest string, port int, caBundle []byte, podLabel string) ([]string, error) {
	data, err := os.ReadFile(manifest)
	if err != nil {
		return nil, err
	}
	docs, err := SplitYAML(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", manifest, err)
	}
	clientConfig := func(cc admissionv1.WebhookClientConfig) (admissionv1.WebhookClientConfig, error) {
		if cc.Service == nil || cc.Service.Path == nil {
			return cc, fmt.Errorf("%s: webhook without service path", manifest)
		}
		u := fmt.Sprintf("https://127.0.0.1:%d%s", port, *cc.Service.Path)
		return admissionv1.WebhookClientConfig{URL: &u, CABundle: caBundle}, nil
	}
	podSelector := func(rules []admissionv1.RuleWithOperations) *metav1.LabelSelector {
		for _, r := range rules {
			for _, res := range r.Resources {
				if res == "pods" {
					return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: podLabel, Operator: metav1.LabelSelectorOpExists}}}
				}
			}
		}
		return nil
	}
	// toLoopback points one webhook (mutating or validating: same fields)
	// at the operator's loopback URL and narrows pod webhooks to its pods.
	toLoopback := func(cc *admissionv1.WebhookClientConfig, sel **metav1.LabelSelector, rules []admissionv1.RuleWithOperations) error {
		var err error
		if *cc, err = clientConfig(*cc); err != nil {
			return err
		}
		if s := podSelector(rules); s != nil {
			*sel = s
		}
		return nil
	}
	var names []string
	for i, doc := range docs {
		var meta metav1.TypeMeta
		if err := json.Unmarshal(doc, &meta); err != nil {
			return names, fmt.Errorf("%s document %d: %w", manifest, i+1, err)
		}
		switch meta.Kind {
		case "MutatingWebhookConfiguration":
			var wc admissionv1.MutatingWebhookConfiguration
			if err := yaml.Unmarshal(doc, &wc); err != nil {
				return names, err
			}
			wc.Name = op + "-" + wc.Name
			for j := range wc.Webhooks {
				w := &wc.Webhooks[j]
				if err := toLoopback(&w.ClientConfig, &w.ObjectSelector, w.Rules); err != nil {
					return names, err
				}
			}
			deleteWebhookConfiguration(cp, wc.Name)
			if _, err := cp.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, &wc, metav1.CreateOptions{}); err != nil {
				return names, err
			}
			names = append(names, wc.Name)
		case "ValidatingWebhookConfiguration":
			var wc admissionv1.ValidatingWebhookConfiguration
			if err := yaml.Unmarshal(doc, &wc); err != nil {
				return names, err
			}
			wc.Name = op + "-" + wc.Name
			for j := range wc.Webhooks {
				w := &wc.Webhooks[j]
				if err := toLoopback(&w.ClientConfig, &w.ObjectSelector, w.Rules); err != nil {
					return names, err
				}
			}
			deleteWebhookConfiguration(cp, wc.Name)
			if _, err := cp.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, &wc, metav1.CreateOptions{}); err != nil {
				return names, err
			}
			names = append(names, wc.Name)
		default:
			return names, fmt.Errorf("%s document %d: unexpected kind %q", manifest, i+1, meta.Kind)
		}
	}
	return names, nil
}

// deleteWebhookConfiguration deletes a mutating or validating webhook
// configuration of that name, if any.
func deleteWebhookConfiguration(cp *ControlPlane, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	adm := cp.Client.AdmissionregistrationV1()
	if err := adm.MutatingWebhookConfigurations().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		fmt.Fprintf(cp.LogOutput(), "delete mutating webhook configuration %s: %v\n", name, err)
	}
	if err := adm.ValidatingWebhookConfigurations().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		fmt.Fprintf(cp.LogOutput(), "delete validating webhook configuration %s: %v\n", name, err)
	}
}
