package localcluster

import (
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	apiservertesting "k8s.io/kubernetes/cmd/kube-apiserver/app/testing"
)

// Options configures Start. The zero value is a usable control plane.
type Options struct {
	// APIServerFlags are extra kube-apiserver flags, for example
	// "--authorization-mode=Node,RBAC". The harness always passes
	// --disable-admission-plugins=ServiceAccount,TaintNodesByCondition: there
	// is no service-account controller to create the default SA and no node
	// lifecycle controller to lift the not-ready taint; and
	// --shutdown-watch-termination-grace-period=2s, so that Stop does not
	// wait a minute for clients' open watches. A later flag of the same
	// name wins.
	APIServerFlags []string

	// NativePodGroups serves the upstream gang-scheduling API
	// (scheduling.k8s.io/v1beta1 Workload and PodGroup) by turning on the
	// GenericWorkload feature gate. Feature gates are process-global: the
	// in-process scheduler and controllers see the gate too, so the default
	// scheduler gang-schedules native PodGroups and StartControllers runs
	// the PodGroup protection controller. See gates.go for how gates are
	// set and restored.
	NativePodGroups bool

	// WorkloadWithJob also turns on the alpha WorkloadWithJob gate (and
	// implies NativePodGroups, which it depends on): the apiserver accepts
	// Job.spec.scheduling, and the Job controller of StartControllers
	// creates a Workload and a PodGroup for every root Job (one without a
	// controller owner) and creates its pods in that group. It changes
	// what plain Jobs do on the whole cluster, so only tests of that
	// behaviour should ask for it.
	//
	// Because gates are process-global, Start refuses WorkloadWithJob
	// while another control plane of this process runs without it: that
	// one's Job controller was built without the Workload and PodGroup
	// informers the gate needs, and would fail every sync of every root Job
	// ("workload indexer is not configured") once the gate is on. A test
	// binary that shares one control plane from TestMain must therefore set
	// it there, or test it in a binary of its own.
	WorkloadWithJob bool

	// KubeconfigPath is where the admin kubeconfig is written. Empty means a
	// file in the control plane's own temp dir, removed by Stop.
	KubeconfigPath string

	// LogOutput receives the logs of etcd, the apiserver and every in-process
	// component. Nil discards them unless MUSTER_TEST_VERBOSE=1 (stderr).
	// klog is process-global: the first control plane of a process decides.
	LogOutput io.Writer

	// Progress, if set, is called after each start-up step with a short
	// description and the time since Start began ("etcd ready", 0.08s).
	Progress func(step string, sinceStart time.Duration)

	// StartTimeout bounds etcd's start (the apiserver has its own one-minute
	// limit). Default 30s.
	StartTimeout time.Duration

	// Restartable lets RestartAPIServer stop and start the kube-apiserver
	// on the same etcd with every client config still valid: clients reach
	// it through a proxy on a fixed address, with a static admin token and
	// the serving certificate kept in Dir (see restart.go). The harness adds
	// --cert-dir and --token-auth-file to the apiserver flags.
	Restartable bool
}

// ControlPlane is a running etcd + kube-apiserver with admin clients. Every
// component started through the harness (controllers, simulator, schedulers,
// operators) registers itself and is stopped by Stop.
type ControlPlane struct {
	// RestConfig is the admin loopback config (protobuf content type,
	// QPS 1000 / burst 10000). Built-in clients should use it.
	RestConfig *rest.Config
	// JSONConfig is RestConfig with JSON content type. Use it for clients of
	// custom resources (controller-runtime fails to write CR status through
	// protobuf).
	JSONConfig *rest.Config

	Client        kubernetes.Interface
	Dynamic       dynamic.Interface
	APIExtensions apiextensionsclient.Interface

	// KubeconfigPath is a kubeconfig file for kubectl and child processes.
	KubeconfigPath string
	// EtcdEndpoint is the client URL of the embedded etcd.
	EtcdEndpoint string

	mapper *restmapper.DeferredDiscoveryRESTMapper
	tb     *processTB
	dir    string
	logOut io.Writer
	etcd   *embed.Etcd
	// restart is set when Options.Restartable is.
	restart *apiRestarter
	// gates is this control plane's entry in the process's gate users.
	gates gateUse

	mu       sync.Mutex
	stops    []namedStop
	stopped  bool
	stopOnce sync.Once
}

type namedStop struct {
	name string
	fn   func()
}

// Start brings up etcd and kube-apiserver and returns once the apiserver is
// healthy and the default namespace exists (about two seconds). Call Stop
// when done, also after an error-free Start whose later steps failed.
func Start(opts Options) (cp *ControlPlane, err error) {
	begin := time.Now()
	progress := func(step string) {
		if opts.Progress != nil {
			opts.Progress(step, time.Since(begin))
		}
	}
	if opts.StartTimeout == 0 {
		opts.StartTimeout = 30 * time.Second
	}
	out := logOutput(opts.LogOutput)
	configureKlog(out)

	dir, err := os.MkdirTemp("", "muster-controlplane-")
	if err != nil {
		return nil, fmt.Errorf("control plane temp dir: %w", err)
	}
	cp = &ControlPlane{tb: newProcessTB("muster-controlplane", out), dir: dir, logOut: out}
	defer func() {
		if err != nil {
			cp.Stop()
			cp = nil
		}
	}()

	progress("starting etcd")
	if err := cp.startEtcd(opts.StartTimeout); err != nil {
		return cp, err
	}
	progress("etcd ready")

	progress("starting kube-apiserver")
	if err := cp.startAPIServer(opts); err != nil {
		return cp, err
	}
	progress("kube-apiserver ready")

	if err := cp.buildClients(opts.KubeconfigPath); err != nil {
		return cp, err
	}
	return cp, nil
}

func (cp *ControlPlane) startEtcd(timeout time.Duration) error {
	cfg := embed.NewConfig()
	cfg.Dir = filepath.Join(cp.dir, "etcd")
	cfg.UnsafeNoFsync = true
	cfg.LogLevel = "error"
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(etcdLogger(cp.logOut))
	// Fast elections: a single member is leader after ~80ms instead of ~0.6s.
	cfg.TickMs, cfg.ElectionMs = 10, 100
	loopback := url.URL{Scheme: "http", Host: "127.0.0.1:0"}
	cfg.ListenClientUrls = []url.URL{loopback}
	cfg.AdvertiseClientUrls = []url.URL{loopback}
	cfg.ListenPeerUrls = []url.URL{loopback}
	cfg.AdvertisePeerUrls = []url.URL{loopback}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return fmt.Errorf("start etcd: %w", err)
	}
	cp.etcd = e
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		return fmt.Errorf("etcd failed while starting: %w", err)
	case <-time.After(timeout):
		return fmt.Errorf("etcd not ready after %s", timeout)
	}
	cp.EtcdEndpoint = "http://" + e.Clients[0].Addr().String()
	return nil
}

func (cp *ControlPlane) startAPIServer(opts Options) error {
	sc := storagebackend.NewDefaultConfig(fmt.Sprintf("/%s/registry", filepath.Base(cp.dir)), nil)
	sc.Transport.ServerList = []string{cp.EtcdEndpoint}

	flags := []string{
		"--disable-admission-plugins=ServiceAccount,TaintNodesByCondition",
		// Without a watch grace period the apiserver's HTTP shutdown waits
		// its full request timeout (60 s) for every open watch, such as a
		// user's `kubectl get -w` on the sandbox; with one, the watch
		// handlers see the shutdown signal and end at once.
		"--shutdown-watch-termination-grace-period=2s",
	}
	gateFlags, err := cp.featureGateFlags(opts)
	if err != nil {
		return err
	}
	flags = append(flags, gateFlags...)
	flags = append(flags, opts.APIServerFlags...)

	if opts.Restartable {
		return cp.startRestartableAPIServer(flags, sc)
	}
	ts, err := startTestServer(cp.tb, flags, sc)
	if err != nil {
		return err
	}
	// TearDownFn stops the server and removes its temp dir; it runs before
	// the TB's own cleanups (feature gate restore) and etcd's Close.
	cp.tb.Cleanup(ts.TearDownFn)
	cp.RestConfig = ts.ClientConfig
	return nil
}

// startTestServer starts one upstream kube-apiserver test server.
func startTestServer(tb *processTB, flags []string, sc *storagebackend.Config) (ts apiservertesting.TestServer, err error) {
	// The upstream test server reports setup failures through tb.Fatal,
	// which panics here; turn that back into an error.
	defer func() {
		if r := recover(); r != nil {
			fp, ok := r.(fatalPanic)
			if !ok {
				panic(r)
			}
			err = fmt.Errorf("kube-apiserver: %s", fp.msg)
		}
	}()
	ts, err = apiservertesting.StartTestServer(tb,
		&apiservertesting.TestServerInstanceOptions{DisableInvariantChecks: true},
		flags, sc)
	if err != nil {
		return ts, fmt.Errorf("start kube-apiserver: %w", err)
	}
	return ts, nil
}

func (cp *ControlPlane) buildClients(kubeconfigPath string) error {
	cp.JSONConfig = rest.CopyConfig(cp.RestConfig)
	cp.JSONConfig.ContentType = "application/json"
	cp.JSONConfig.AcceptContentTypes = "application/json"

	var err error
	if cp.Client, err = kubernetes.NewForConfig(cp.RestConfig); err != nil {
		return fmt.Errorf("kubernetes client: %w", err)
	}
	if cp.Dynamic, err = dynamic.NewForConfig(cp.JSONConfig); err != nil {
		return fmt.Errorf("dynamic client: %w", err)
	}
	if cp.APIExtensions, err = apiextensionsclient.NewForConfig(cp.JSONConfig); err != nil {
		return fmt.Errorf("apiextensions client: %w", err)
	}
	cp.mapper = restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(cp.Client.Discovery()))

	if kubeconfigPath == "" {
		kubeconfigPath = filepath.Join(cp.dir, "kubeconfig")
	}
	if err := writeKubeconfig(cp.RestConfig, kubeconfigPath); err != nil {
		return err
	}
	cp.KubeconfigPath = kubeconfigPath
	return nil
}

// KubeconfigContext is the name of the context (and cluster) in the
// kubeconfig files the harness writes.
const KubeconfigContext = "muster-harness"

// writeKubeconfig writes an admin kubeconfig (server, CA, token) for cfg.
func writeKubeconfig(cfg *rest.Config, path string) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters[KubeconfigContext] = &clientcmdapi.Cluster{
		Server:                   cfg.Host,
		CertificateAuthorityData: cfg.TLSClientConfig.CAData,
		TLSServerName:            cfg.TLSClientConfig.ServerName,
	}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{Token: cfg.BearerToken}
	kc.Contexts[KubeconfigContext] = &clientcmdapi.Context{Cluster: KubeconfigContext, AuthInfo: "admin", Namespace: "default"}
	kc.CurrentContext = KubeconfigContext
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("kubeconfig dir: %w", err)
	}
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return fmt.Errorf("write kubeconfig %s: %w", path, err)
	}
	return nil
}

// OnStop registers fn to run when the control plane stops, before the
// apiserver goes down. Stops run last-in first-out. Components started through
// the harness register themselves; use this for your own.
func (cp *ControlPlane) OnStop(name string, fn func()) {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	if cp.stopped {
		// Too late to defer: the caller raced Stop. Stop it now.
		go fn()
		return
	}
	cp.stops = append(cp.stops, namedStop{name: name, fn: fn})
}

// Dir is a scratch directory owned by the control plane, removed by Stop.
func (cp *ControlPlane) Dir() string { return cp.dir }

// LogOutput is where the control plane's components log; child processes
// and extra components may write there too.
func (cp *ControlPlane) LogOutput() io.Writer { return cp.logOut }

// Stop stops every registered component (last started first), then the
// apiserver and etcd, and removes all temp files. It is safe to call more
// than once.
func (cp *ControlPlane) Stop() {
	cp.stopOnce.Do(func() {
		cp.mu.Lock()
		cp.stopped = true
		stops := cp.stops
		cp.stops = nil
		cp.mu.Unlock()
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i].fn()
		}
		cp.tb.runCleanups()
		// After the cleanups: they restore the gates this one changed.
		cp.gates.release()
		if cp.etcd != nil {
			cp.etcd.Close()
		}
		_ = os.RemoveAll(cp.dir)
	})
}

// errStopped is returned by helpers called after Stop.
var errStopped = errors.New("control plane is stopped")

// live returns errStopped after Stop; cheap guard for start helpers.
func (cp *ControlPlane) live() error {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	if cp.stopped {
		return errStopped
	}
	return nil
}
