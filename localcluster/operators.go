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
	"regexp"
	"runtime"
	"slices"
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
//
// What differs between operators is data, in operators/<name>/operator.yaml
// beside that go.mod, so that adding an operator touches no Go code.
type operatorSpec struct {
	Module      string `json:"module"` // module path required by the go.mod beside it
	MainPackage string `json:"mainPackage"`
	CRDDir      string `json:"crdDir"` // CRD YAML directory inside the module
	// Webhooks is the kubebuilder webhook manifest inside the module; empty
	// for an operator that runs without webhooks, which is then ready once
	// its health probe answers.
	Webhooks  string `json:"webhooks,omitempty"`
	ConfigAPI string `json:"configAPI,omitempty"` // apiVersion of the operator's Configuration file; empty: none
	// PodLabel: the operator's pod webhooks only see pods carrying this
	// label (the upstream kustomize patches add that objectSelector).
	PodLabel string `json:"podLabel,omitempty"`
	// Args is the command line, with placeholders for what only exists at
	// run time (see operatorPlaceholders). Operators name these flags
	// differently, and every one must turn off leader election, metrics and
	// probes on fixed ports.
	Args []string `json:"args"`
}

const operatorSpecFile = "operator.yaml"

// operatorRun is what exists only once StartOperator runs the operator.
type operatorRun struct {
	kubeconfig string // the control plane's kubeconfig file
	config     string // the Configuration file StartOperator writes; empty without configAPI
	// probe is the health probe address: "0" for operators with webhooks,
	// which are ready once their webhook server is.
	probe string
}

// operatorPlaceholders are the {{name}}s operator.yaml's args may hold.
var operatorPlaceholders = map[string]func(operatorRun) string{
	"kubeconfig": func(r operatorRun) string { return r.kubeconfig },
	"config":     func(r operatorRun) string { return r.config },
	"probe":      func(r operatorRun) string { return r.probe },
}

var placeholderRE = regexp.MustCompile(`\{\{([^{}]*)\}\}`)

// parseOperatorSpec decodes and checks an operator.yaml; file only names it
// in errors.
func parseOperatorSpec(file string, data []byte) (operatorSpec, error) {
	var spec operatorSpec
	if err := yaml.UnmarshalStrict(data, &spec); err != nil {
		return spec, fmt.Errorf("%s: %w", file, err)
	}
	for _, f := range []struct{ field, value string }{
		{"module", spec.Module}, {"mainPackage", spec.MainPackage}, {"crdDir", spec.CRDDir},
	} {
		if f.value == "" {
			return spec, fmt.Errorf("%s: %s: required", file, f.field)
		}
	}
	if len(spec.Args) == 0 {
		return spec, fmt.Errorf("%s: args: required", file)
	}
	if spec.PodLabel != "" && spec.Webhooks == "" {
		return spec, fmt.Errorf("%s: podLabel: only pod webhooks use it, and webhooks is empty", file)
	}
	if spec.Webhooks != "" && spec.ConfigAPI == "" {
		// The Configuration file is where the webhook server learns its
		// port and certificate.
		return spec, fmt.Errorf("%s: webhooks: needs configAPI", file)
	}
	used := map[string]bool{}
	for i, arg := range spec.Args {
		for _, m := range placeholderRE.FindAllStringSubmatch(arg, -1) {
			if _, ok := operatorPlaceholders[m[1]]; !ok {
				return spec, fmt.Errorf("%s: args[%d]: unknown placeholder %s (have %s)", file, i, m[0], placeholderList())
			}
			used[m[1]] = true
		}
		if rest := placeholderRE.ReplaceAllString(arg, ""); strings.Contains(rest, "{{") || strings.Contains(rest, "}}") {
			return spec, fmt.Errorf("%s: args[%d]: malformed placeholder in %q", file, i, arg)
		}
	}
	switch {
	case !used["kubeconfig"]:
		// Without it the operator would find the caller's kubeconfig and
		// act on a real cluster.
		return spec, fmt.Errorf("%s: args: no {{kubeconfig}}", file)
	case used["config"] && spec.ConfigAPI == "":
		return spec, fmt.Errorf("%s: args: {{config}} needs configAPI", file)
	case !used["config"] && spec.ConfigAPI != "":
		// Otherwise the Configuration that turns off leader election and
		// fixed ports would be written and never read.
		return spec, fmt.Errorf("%s: args: configAPI is set but no arg passes {{config}}", file)
	case !used["probe"] && spec.Webhooks == "" && spec.ConfigAPI == "":
		// Nothing else would tell the operator the port it is waited on.
		return spec, fmt.Errorf("%s: args: no {{probe}}, and without webhooks StartOperator waits on the probe", file)
	}
	return spec, nil
}

func placeholderList() string {
	names := make([]string, 0, len(operatorPlaceholders))
	for n := range operatorPlaceholders {
		names = append(names, "{{"+n+"}}")
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// command returns the operator's args with their placeholders filled in
// (parseOperatorSpec has checked that each is known).
func (spec operatorSpec) command(run operatorRun) []string {
	args := make([]string, len(spec.Args))
	for i, arg := range spec.Args {
		args[i] = placeholderRE.ReplaceAllStringFunc(arg, func(m string) string {
			return operatorPlaceholders[m[2:len(m)-2]](run)
		})
	}
	return args
}

// operatorsDir is localcluster/operators in the source tree this package
// was built from.
func operatorsDir() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok || !filepath.IsAbs(file) {
		return "", errors.New("cannot locate localcluster/operators (built with -trimpath?)")
	}
	return filepath.Join(filepath.Dir(file), "operators"), nil
}

// operatorNames returns operatorsDir and the directories in it with an
// operator.yaml.
func operatorNames() (string, []string, error) {
	dir, err := operatorsDir()
	if err != nil {
		return "", nil, err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", nil, err
	}
	var names []string
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, e.Name(), operatorSpecFile)); err == nil {
			names = append(names, e.Name())
		} else if !errors.Is(err, os.ErrNotExist) {
			return "", nil, err
		}
	}
	return dir, names, nil // os.ReadDir sorts by name
}

// Operators lists the operators StartOperator can run. When they cannot be
// listed (see operatorNames) it lists none, and StartOperator and the other
// operator functions say why.
func Operators() []string {
	_, names, err := operatorNames()
	if err != nil {
		return nil
	}
	return names
}

// operator reads and checks the named operator's operator.yaml and returns
// it with the operator's directory.
func operator(name string) (operatorSpec, string, error) {
	root, names, err := operatorNames()
	if err != nil {
		return operatorSpec{}, "", fmt.Errorf("operator %s: %w", name, err)
	}
	if !slices.Contains(names, name) {
		return operatorSpec{}, "", fmt.Errorf("unknown operator %q (have %s)", name, strings.Join(names, ", "))
	}
	dir := filepath.Join(root, name)
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		return operatorSpec{}, "", fmt.Errorf("operator %s: %w", name, err)
	}
	file := filepath.Join(dir, operatorSpecFile)
	data, err := os.ReadFile(file)
	if err != nil {
		return operatorSpec{}, "", fmt.Errorf("operator %s: %w", name, err)
	}
	spec, err := parseOperatorSpec(file, data)
	if err != nil {
		return operatorSpec{}, "", fmt.Errorf("operator %s: %w", name, err)
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
	out, err := goCmd(ctx, dir, "mod", "download", "-json", spec.Module)
	if err != nil {
		return "", err
	}
	var m struct{ Dir, Error string }
	if err := json.Unmarshal(out, &m); err != nil {
		return "", fmt.Errorf("go mod download %s: %w", spec.Module, err)
	}
	if m.Error != "" || m.Dir == "" {
		return "", fmt.Errorf("go mod download %s: %s", spec.Module, m.Error)
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
	files, err := filepath.Glob(filepath.Join(modDir, spec.CRDDir, "*.yaml"))
	if err != nil || len(files) == 0 {
		return fmt.Errorf("operator %s: no CRDs in %s (%v)", name, filepath.Join(modDir, spec.CRDDir), err)
	}
	for _, f := range files {
		if err := cp.InstallCRDFile(ctx, f); err != nil {
			return fmt.Errorf("operator %s: %w", name, err)
		}
	}
	return nil
}

// buildLocks serializes builds of one cached binary (one lock per path), so
// that two operators build at the same time while two callers of the same
// operator build it once.
var buildLocks sync.Map // cache path → *sync.Mutex

// BuildOperator builds the operator's binary once and caches it under
// os.UserCacheDir()/muster-operators, keyed by a hash of the operator
// module's go.mod and go.sum, so later runs reuse it. A cold build takes
// 2–5 minutes per operator on two cores; different operators build in
// parallel. operator.yaml is left out of
// the key so that editing the command line keeps the binary; a new
// mainPackage at the same module version needs the cache entry removed.
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
	mu, _ := buildLocks.LoadOrStore(bin, &sync.Mutex{})
	mu.(*sync.Mutex).Lock()
	defer mu.(*sync.Mutex).Unlock()
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
	if _, err := goCmd(ctx, dir, "build", "-o", tmp, spec.MainPackage); err != nil {
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
	if spec.Webhooks == "" {
		// No webhook server to wait for: serve the health probe on the
		// port instead.
		probe = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	}
	if spec.ConfigAPI != "" {
		certDir := filepath.Join(dir, "certs")
		webhook := ""
		if spec.Webhooks != "" {
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
`, spec.ConfigAPI, probe) + webhook
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
	args := spec.command(operatorRun{kubeconfig: cp.KubeconfigPath, config: configPath, probe: probe})
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
			return cc, errors.New("webhook without service path")
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
	// toLoopback points one webhook at the operator's loopback URL and
	// narrows pod webhooks to its pods.
	toLoopback := func(w webhookFields) error {
		var err error
		if *w.clientConfig, err = clientConfig(*w.clientConfig); err != nil {
			return err
		}
		if s := podSelector(w.rules); s != nil {
			*w.objectSelector = s
		}
		return nil
	}
	adm := cp.Client.AdmissionregistrationV1()
	var names []string
	for i, doc := range docs {
		var meta metav1.TypeMeta
		if err := json.Unmarshal(doc, &meta); err != nil {
			return names, fmt.Errorf("%s document %d: %w", manifest, i+1, err)
		}
		var name string
		switch meta.Kind {
		case "MutatingWebhookConfiguration":
			name, err = createWebhookConfiguration(ctx, cp, op, doc, toLoopback, adm.MutatingWebhookConfigurations().Create,
				func(wc *admissionv1.MutatingWebhookConfiguration) []admissionv1.MutatingWebhook { return wc.Webhooks },
				func(w *admissionv1.MutatingWebhook) webhookFields {
					return webhookFields{&w.ClientConfig, &w.ObjectSelector, w.Rules}
				})
		case "ValidatingWebhookConfiguration":
			name, err = createWebhookConfiguration(ctx, cp, op, doc, toLoopback, adm.ValidatingWebhookConfigurations().Create,
				func(wc *admissionv1.ValidatingWebhookConfiguration) []admissionv1.ValidatingWebhook {
					return wc.Webhooks
				},
				func(w *admissionv1.ValidatingWebhook) webhookFields {
					return webhookFields{&w.ClientConfig, &w.ObjectSelector, w.Rules}
				})
		default:
			return names, fmt.Errorf("%s document %d: unexpected kind %q", manifest, i+1, meta.Kind)
		}
		if err != nil {
			return names, fmt.Errorf("%s document %d: %w", manifest, i+1, err)
		}
		names = append(names, name)
	}
	return names, nil
}

// webhookFields are the fields of one mutating or validating webhook that
// registerWebhooks rewrites: the two types share them but no Go type.
type webhookFields struct {
	clientConfig   *admissionv1.WebhookClientConfig
	objectSelector **metav1.LabelSelector
	rules          []admissionv1.RuleWithOperations
}

// createWebhookConfiguration decodes one mutating or validating webhook
// configuration (C) from doc, prefixes its name with the operator's, passes
// each of its webhooks (W) through rewrite, and creates it in place of any
// left by an earlier run. It returns the name created.
func createWebhookConfiguration[C any, PC interface {
	*C
	metav1.Object
}, W any](
	ctx context.Context, cp *ControlPlane, op string, doc []byte,
	rewrite func(webhookFields) error,
	create func(context.Context, PC, metav1.CreateOptions) (PC, error),
	webhooks func(PC) []W, fields func(*W) webhookFields,
) (string, error) {
	wc := PC(new(C))
	if err := yaml.Unmarshal(doc, wc); err != nil {
		return "", err
	}
	wc.SetName(op + "-" + wc.GetName())
	hooks := webhooks(wc)
	for j := range hooks {
		if err := rewrite(fields(&hooks[j])); err != nil {
			return "", err
		}
	}
	deleteWebhookConfiguration(cp, wc.GetName())
	if _, err := create(ctx, wc, metav1.CreateOptions{}); err != nil {
		return "", err
	}
	return wc.GetName(), nil
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
