package app

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"sigs.k8s.io/yaml"

	podgrouperapp "github.com/muster-io/muster/cmd/muster-podgrouper/app"
	schedulerapp "github.com/muster-io/muster/cmd/muster-scheduler/app"
	"github.com/muster-io/muster/localcluster"
	"github.com/muster-io/muster/localcluster/operators"
)

// The sandbox runs what muster ships, read from the source tree it is built
// from: the CRDs of manifests/crds and the scheduler configuration of
// manifests/scheduler-config.yaml (the one the ConfigMap of the install
// manifests holds). The operators are built from localcluster/operators, so the
// sandbox needs the tree anyway; `make run` runs from it.
const (
	crdDir          = "manifests/crds"
	schedulerConfig = "manifests/scheduler-config.yaml"
)

// repoRoot finds the muster source tree: beside this file when the binary
// was built with full paths (go run, go build), else the first directory
// upward from the working directory that holds the scheduler configuration.
func repoRoot() (string, error) {
	var tried []string
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		dir := filepath.Join(filepath.Dir(file), "..", "..", "..")
		if isRepo(dir) {
			return filepath.Clean(dir), nil
		}
		tried = append(tried, dir)
	}
	if wd, err := os.Getwd(); err == nil {
		for dir := wd; ; dir = filepath.Dir(dir) {
			if isRepo(dir) {
				return dir, nil
			}
			tried = append(tried, dir)
			if filepath.Dir(dir) == dir {
				break
			}
		}
	}
	return "", fmt.Errorf("cannot find the muster source tree (a directory with go.mod and %s; tried %s): run the sandbox from a muster checkout (make run)",
		schedulerConfig, strings.Join(tried, ", "))
}

func isRepo(dir string) bool {
	gomod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil || !strings.Contains(string(gomod), "module github.com/muster-io/muster\n") {
		return false
	}
	_, err = os.Stat(filepath.Join(dir, schedulerConfig))
	return err == nil
}

// installMusterCRDs installs every CRD muster ships (Karta, PodGroup) and
// returns their file names.
func installMusterCRDs(ctx context.Context, cp *localcluster.ControlPlane, root string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(root, crdDir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no CRDs in %s", filepath.Join(root, crdDir))
	}
	var names []string
	for _, f := range files {
		if err := cp.InstallCRDFile(ctx, f); err != nil {
			return names, fmt.Errorf("%s: %w", f, err)
		}
		names = append(names, filepath.Base(f))
	}
	return names, nil
}

// startScheduler runs muster-scheduler: kube-scheduler's own command path
// with the MusterGang plugin registered, on the shipped configuration (see
// schedulerConfigFor).
func startScheduler(ctx context.Context, cp *localcluster.ControlPlane, root string) error {
	cfg, err := schedulerConfigFor(root, cp.KubeconfigPath, false)
	if err != nil {
		return err
	}
	if _, err := localcluster.StartSchedulerApp(ctx, cp, cfg, schedulerapp.Plugins()...); err != nil {
		return fmt.Errorf("%s: %w", schedulerConfig, err)
	}
	return nil
}

// schedulerConfigFor is the shipped scheduler configuration with the
// settings that are the sandbox's: the client connection (kubeconfig instead
// of the in-cluster account; the shipped QPS and burst only when
// shippedLimits, else the harness's) and leader election (off: there is one
// replica, and kube-scheduler's app exits the process when its leadership
// ends, which would take the sandbox with it). With --no-muster the sandbox
// writes it, with the shipped limits, for the developer's own
// muster-scheduler.
func schedulerConfigFor(root, kubeconfig string, shippedLimits bool) ([]byte, error) {
	path := filepath.Join(root, schedulerConfig)
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var doc map[string]any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if doc == nil {
		return nil, fmt.Errorf("%s: empty", path)
	}
	conn, _ := doc["clientConnection"].(map[string]any)
	if conn == nil || !shippedLimits {
		conn = map[string]any{}
	}
	conn["kubeconfig"] = kubeconfig
	doc["clientConnection"] = conn
	doc["leaderElection"] = map[string]any{"leaderElect": false}
	return yaml.Marshal(doc)
}

// startPodGrouper runs the muster-podgrouper command's Run in this process
// with its default options (the embedded catalog, scheduler name
// muster-scheduler, leader election on its lease as in the shipped
// Deployment, so a second pod-grouper started against the sandbox waits
// instead of writing beside it), on the sandbox's kubeconfig, its health
// endpoints on a loopback port. It returns once /readyz says the
// controller's caches are synced. tweak, when set, changes the options
// before the start (native mode).
func startPodGrouper(ctx context.Context, cp *localcluster.ControlPlane, tweak func(*podgrouperapp.Options)) (stop func(), err error) {
	port, err := localcluster.FreePort()
	if err != nil {
		return nil, err
	}
	o := podgrouperapp.NewOptions()
	o.Kubeconfig = cp.KubeconfigPath
	o.LeaderElection.LeaderElect = true
	o.BindAddress = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	if tweak != nil {
		tweak(o)
	}
	// Validate only checks the values (it leaves the process's logging,
	// already the control plane's, alone).
	if err := o.Validate(); err != nil {
		return nil, err
	}

	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	exited := make(chan struct{})
	var runErr error
	go func() {
		defer close(exited)
		runErr = podgrouperapp.Run(runCtx, o)
	}()
	stop = sync.OnceFunc(func() {
		cancel()
		<-exited
	})
	cp.OnStop("pod-grouper", stop)

	url := "http://" + o.BindAddress + "/readyz"
	client := &http.Client{Timeout: time.Second}
	err = localcluster.WaitFor(ctx, localcluster.ShortTimeout, "pod-grouper "+url, func(context.Context) (bool, string, error) {
		select {
		case <-exited:
			return false, "", fmt.Errorf("pod-grouper stopped: %v", runErr)
		default:
		}
		resp, err := client.Get(url)
		if err != nil {
			return false, err.Error(), nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, resp.Status, nil
	})
	if err != nil {
		stop()
		return nil, err
	}
	return stop, nil
}

// operatorBuild is an operator binary being built (or found in the cache)
// in the background.
type operatorBuild struct {
	name string
	done chan struct{} // closed when the build has ended; then err, took
	err  error
	took time.Duration
	slow atomic.Bool // the build outlasted slowBuild: it was not cached
}

// slowBuild: a cached operator binary is found in well under this; a build
// that takes longer is a real (first-run) build and says so.
const slowBuild = 2 * time.Second

// buildOperators builds the named operators at the same time, while the
// sandbox goes on; operators.Build caches the binaries
// (os.UserCacheDir()/muster-operators) and locks each one on its own, so
// only a first run pays, and it pays for the slowest operator, not the sum.
// Builds stop when ctx ends; wait waits for every builder.
func buildOperators(ctx context.Context, names []string, progress func(string, ...any)) (builds map[string]*operatorBuild, wait func()) {
	builds = map[string]*operatorBuild{}
	var wg sync.WaitGroup
	for _, name := range names {
		b := &operatorBuild{name: name, done: make(chan struct{})}
		builds[name] = b
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer close(b.done)
			began := time.Now()
			timer := time.AfterFunc(slowBuild, func() {
				b.slow.Store(true)
				progress("building the %s operator (first run only, 2–5 min; operators build in parallel)…", b.name)
			})
			_, b.err = operators.Build(ctx, b.name)
			timer.Stop()
			b.took = time.Since(began)
		}()
	}
	return builds, wg.Wait
}

// startOperator waits for the operator's build and runs it; its webhooks are
// registered by URL and deleted again when the control plane stops.
func startOperator(ctx context.Context, cp *localcluster.ControlPlane, b *operatorBuild, opts localcluster.OperatorOptions, progress func(string, ...any)) error {
	select {
	case <-b.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	if b.err != nil {
		return b.err
	}
	if b.slow.Load() {
		progress("%s operator built in %s (cached for later runs)", b.name, b.took.Round(time.Second))
	}
	_, err := localcluster.StartOperatorWith(ctx, cp, b.name, opts)
	return err
}

// ensureOperator starts op when the first example that needs one comes,
// so the first example runs while the next operator still builds. An
// operator that does not start is unavailable, not an error: the sandbox
// goes on without the examples that need it. Only ctx ending is an error.
func (sb *sandbox) ensureOperator(ctx context.Context, op string) error {
	if op == "" || sb.started[op] || sb.unavailable[op] != "" {
		return nil
	}
	if err := startOperator(ctx, sb.cp, sb.builds[op], sb.operatorOptions[op], sb.progress); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		sb.setUnavailable(op, firstLine(err), "operator "+op, err)
		return nil
	}
	sb.started[op] = true
	sb.progress("%s operator running", op)
	return nil
}

// setUnavailable marks op as not running for the reason why, which a
// progress line shows; err goes whole to the log file after logPrefix.
func (sb *sandbox) setUnavailable(op, why, logPrefix string, err error) {
	sb.unavailable[op] = why
	fmt.Fprintf(sb.logFile, "%s: %v\n", logPrefix, err)
	sb.progress("%s operator unavailable (%s; details in the log file); skipping the examples that need it", op, why)
}

// firstLine shortens an error for a progress line; the whole of it goes to
// the log file.
func firstLine(err error) string {
	s := err.Error()
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i] + " …"
	}
	return s
}
