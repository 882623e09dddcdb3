package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/muster-io/muster/api"
	podgrouperapp "github.com/muster-io/muster/cmd/muster-podgrouper/app"
	"github.com/muster-io/muster/localcluster"
	"github.com/muster-io/muster/plugins/gang"
	"github.com/muster-io/muster/test/manifestrender"
)

// impersonating returns a kubeconfig file for cp that acts as user.
func impersonating(t *testing.T, cp *localcluster.ControlPlane, user string) (string, *rest.Config) {
	t.Helper()
	cfg := cp.RestConfig
	kc := clientcmdapi.NewConfig()
	kc.Clusters["c"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.TLSClientConfig.CAData, TLSServerName: cfg.TLSClientConfig.ServerName}
	kc.AuthInfos["u"] = &clientcmdapi.AuthInfo{Token: cfg.BearerToken, Impersonate: user}
	kc.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	kc.CurrentContext = "c"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	rc, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	return path, rc
}

// auditEntry is the part of an audit event the run looks at.
type auditEntry struct {
	Verb       string `json:"verb"`
	RequestURI string `json:"requestURI"`
	User       struct {
		Username string `json:"username"`
	} `json:"user"`
	ImpersonatedUser *struct {
		Username string `json:"username"`
	} `json:"impersonatedUser"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	Stage string `json:"stage"`
}

// auditByUser counts completed requests and lists the Forbidden ones per
// impersonated user.
func auditByUser(t *testing.T, path string) (requests map[string]int, forbidden map[string][]string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	requests, forbidden = map[string]int{}, map[string][]string{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var e auditEntry
		if json.Unmarshal(sc.Bytes(), &e) != nil || e.ImpersonatedUser == nil || e.ResponseStatus == nil {
			continue
		}
		if e.Stage != "ResponseComplete" && e.Stage != "Panic" {
			continue
		}
		u := e.ImpersonatedUser.Username
		requests[u]++
		if e.ResponseStatus.Code == 403 {
			forbidden[u] = append(forbidden[u], e.Verb+" "+e.RequestURI)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return requests, forbidden
}

// installComponentsRun runs the pod-grouper (its real
// command, with the Deployment's arguments) and the scheduler (the
// kube-scheduler app path with the ConfigMap's configuration and the
// MusterGang plugin) as their service accounts, through impersonation, on a
// JobSet-shaped and an LWS-shaped workload. Both must do their whole job —
// PodGroups written, pods labelled, every pod bound, both leases taken —
// and the audit log must hold no Forbidden for either identity.
func installComponentsRun(t *testing.T, cp *localcluster.ControlPlane, auditPath string, objs []*unstructured.Unstructured) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	deploymentArgs, schedulerConfig := installShippedArgs(t, objs)

	// The cluster's own controllers (not muster's) run as admin.
	if _, err := cp.StartControllers(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := cp.StartPodSimulator(ctx, localcluster.PodSimulatorOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cp.CreateNodes(ctx, 3, func(i int) localcluster.NodeSpec {
		return localcluster.NodeSpec{Name: fmt.Sprintf("install-%d", i), CPU: 8}
	}); err != nil {
		t.Fatal(err)
	}

	pgDone := installStartPodGrouper(ctx, t, cp, deploymentArgs["muster-podgrouper"])
	defer func() {
		cancel()
		if err := <-pgDone; err != nil {
			t.Errorf("pod-grouper: %v", err)
		}
	}()
	stopSched, elected, lease := installStartScheduler(ctx, t, cp, deploymentArgs["muster-scheduler"], schedulerConfig)
	defer stopSched()

	ns, err := cp.NewNamespace(ctx, "install-")
	if err != nil {
		t.Fatal(err)
	}
	jsName := createInstallJobSet(t, cp, ns)
	lwsName := createInstallLWS(t, cp, ns)
	installCheckGrouped(ctx, t, cp, ns, jsName, lwsName)
	select {
	case <-elected:
	case <-time.After(localcluster.ShortTimeout):
		t.Errorf("the scheduler's identity could not take lease %s/%s", lease[0], lease[1])
	}
	err = localcluster.WaitFor(ctx, localcluster.ShortTimeout, "pod-grouper lease", func(ctx context.Context) (bool, string, error) {
		l, err := cp.Client.CoordinationV1().Leases(manifestrender.Namespace).Get(ctx, "muster-podgrouper", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, "no lease", nil
		}
		if err != nil {
			return false, "", err
		}
		return l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "", "no holder", nil
	})
	if err != nil {
		t.Error(err)
	}

	// Stop both, then read the audit log: every request they made is in.
	cancel()
	stopSched()
	requests, forbidden := auditByUser(t, auditPath)
	for _, u := range []string{podgrouperSA, schedulerSA} {
		t.Logf("%s: %d requests, %d Forbidden", u, requests[u], len(forbidden[u]))
		if requests[u] == 0 {
			t.Errorf("%s made no request: the audit log does not see it", u)
		}
		if len(forbidden[u]) > 0 {
			sort.Strings(forbidden[u])
			t.Errorf("%s was refused %d request(s):\n  %s", u, len(forbidden[u]), strings.Join(forbidden[u], "\n  "))
		}
	}
}

// installShippedArgs returns the kustomize set's Deployment arguments by
// container name and the scheduler's configuration file.
func installShippedArgs(t *testing.T, objs []*unstructured.Unstructured) (deploymentArgs map[string][]string, schedulerConfig []byte) {
	for _, o := range objs {
		switch {
		case o.GetKind() == "Deployment":
			deploymentArgs = map[string][]string{}
			cs, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
			for _, c := range cs {
				cm := c.(map[string]any)
				args, _, _ := unstructured.NestedStringSlice(cm, "args")
				deploymentArgs[cm["name"].(string)] = args
			}
		case o.GetKind() == "ConfigMap" && o.GetName() == "muster-scheduler-config":
			s, _, _ := unstructured.NestedString(o.Object, "data", "scheduler-config.yaml")
			schedulerConfig = []byte(s)
		}
	}
	if deploymentArgs == nil || schedulerConfig == nil {
		t.Fatal("kustomize set has no Deployment or scheduler ConfigMap")
	}
	return deploymentArgs, schedulerConfig
}

// installStartPodGrouper runs the pod-grouper as its service account until
// ctx ends; the channel gets how it ended.
// Pod-grouper: the shipped command with the Deployment's arguments;
// only the kubeconfig (impersonation instead of the in-cluster token)
// and the listen address differ.
func installStartPodGrouper(ctx context.Context, t *testing.T, cp *localcluster.ControlPlane, deploymentArgs []string) <-chan error {
	pgKubeconfig, _ := impersonating(t, cp, podgrouperSA)
	// The command applies its logging configuration, which is
	// process-global; a second run in this process must not fail on it.
	logsapi.ReapplyHandling = logsapi.ReapplyHandlingIgnoreUnchanged
	pgCmd := podgrouperapp.NewCommand()
	pgArgs := append([]string{}, deploymentArgs...)
	pgArgs = append(pgArgs, "--kubeconfig="+pgKubeconfig, "--bind-address=127.0.0.1:0",
		"--leader-elect-lease-duration=2s", "--leader-elect-renew-deadline=1s", "--leader-elect-retry-period=200ms")
	pgCmd.SetArgs(pgArgs)
	pgDone := make(chan error, 1)
	go func() { pgDone <- pgCmd.ExecuteContext(ctx) }()
	return pgDone
}

// installStartScheduler runs the scheduler as its service account and takes
// its lease as that identity; elected is closed once it holds lease
// (namespace, name).
// Scheduler: the ConfigMap's configuration through kube-scheduler's app
// path. Leader election is taken below with the same Lease: app.Run
// would exit the process when its context ends.
func installStartScheduler(ctx context.Context, t *testing.T, cp *localcluster.ControlPlane, deploymentArgs []string, schedulerConfig []byte) (stop func(), elected <-chan struct{}, lease [2]string) {
	// The Deployment's scheduler flags are kube-scheduler's.
	if err := app.NewSchedulerCommand().ParseFlags(deploymentArgs); err != nil {
		t.Errorf("muster-scheduler args %v: %v", deploymentArgs, err)
	}
	var cfgDoc map[string]any
	if err := yaml.Unmarshal(schedulerConfig, &cfgDoc); err != nil {
		t.Fatal(err)
	}
	le := cfgDoc["leaderElection"].(map[string]any)
	leaseNS, leaseName := le["resourceNamespace"].(string), le["resourceName"].(string)
	schedKubeconfig, schedRC := impersonating(t, cp, schedulerSA)
	cfgDoc["clientConnection"] = map[string]any{"kubeconfig": schedKubeconfig, "qps": 1000, "burst": 2000}
	cfgDoc["leaderElection"] = map[string]any{"leaderElect": false}
	cfgYAML, err := yaml.Marshal(cfgDoc)
	if err != nil {
		t.Fatal(err)
	}
	stopSched, err := localcluster.StartSchedulerApp(ctx, cp, cfgYAML, app.WithPlugin(gang.Name, gang.New))
	if err != nil {
		t.Fatal(err)
	}
	electedCh := make(chan struct{})
	schedCS := kubernetes.NewForConfigOrDie(schedRC)
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, leaseNS, leaseName, schedCS.CoreV1(), schedCS.CoordinationV1(),
		resourcelock.ResourceLockConfig{Identity: "install-test"})
	if err != nil {
		stopSched()
		t.Fatal(err)
	}
	go leaderelection.RunOrDie(ctx, leaderelection.LeaderElectionConfig{
		Lock: lock, LeaseDuration: 2 * time.Second, RenewDeadline: time.Second, RetryPeriod: 200 * time.Millisecond, ReleaseOnCancel: true,
		Callbacks: leaderelection.LeaderCallbacks{OnStartedLeading: func(context.Context) { close(electedCh) }, OnStoppedLeading: func() {}},
	})
	return stopSched, electedCh, [2]string{leaseNS, leaseName}
}

// installCheckGrouped checks that the 6 pods of the JobSet jsName and the
// LWS lwsName in ns are bound, in PodGroups of 3 members per workload, and
// labelled with them.
func installCheckGrouped(ctx context.Context, t *testing.T, cp *localcluster.ControlPlane, ns, jsName, lwsName string) {
	// Not fatal: on failure the audit log below usually says why.
	if _, err := cp.WaitPodsBound(ctx, ns, "", 6, localcluster.LongTimeout); err != nil {
		t.Error(err)
	}
	pgs, err := cp.Dynamic.Resource(schema.GroupVersionResource{Group: "scheduling.x-k8s.io", Version: "v1alpha1", Resource: "podgroups"}).
		Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	minMember := map[string]int64{}
	for _, pg := range pgs.Items {
		m, _, _ := unstructured.NestedInt64(pg.Object, "spec", "minMember")
		minMember[pg.GetLabels()[api.LabelWorkloadName]] += m
	}
	if minMember[jsName] != 3 || minMember[lwsName] != 3 {
		t.Errorf("PodGroups min-member by workload = %v, want %s:3 %s:3", minMember, jsName, lwsName)
	}
	pods, err := cp.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.Labels[api.LabelPodGroup] == "" {
			t.Errorf("pod %s bound but not labelled with its PodGroup", p.Name)
		}
	}
}

func installPodTemplate(restartPolicy string, labels map[string]any) map[string]any {
	return map[string]any{
		"metadata": map[string]any{"labels": labels},
		"spec": map[string]any{
			"schedulerName": "muster-scheduler",
			"restartPolicy": restartPolicy,
			"containers": []any{map[string]any{"name": "main", "image": "registry.invalid/main",
				"resources": map[string]any{"requests": map[string]any{"cpu": "1", "memory": "1Gi"}}}},
		},
	}
}

// createInstallJobSet creates a JobSet of a leader and two workers and, as
// the JobSet operator would, one Job per replica owned by it; the Job
// controller makes the pods. Returns its name.
func createInstallJobSet(t *testing.T, cp *localcluster.ControlPlane, ns string) string {
	t.Helper()
	ctx := context.Background()
	jobSpec := func() map[string]any {
		return map[string]any{"parallelism": int64(1), "completions": int64(1), "backoffLimit": int64(0),
			"template": installPodTemplate("Never", map[string]any{})}
	}
	js := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
		"metadata": map[string]any{"name": "train", "namespace": ns},
		"spec": map[string]any{"replicatedJobs": []any{
			map[string]any{"name": "leader", "replicas": int64(1), "template": map[string]any{"spec": jobSpec()}},
			map[string]any{"name": "workers", "replicas": int64(2), "template": map[string]any{"spec": jobSpec()}},
		}},
	}}
	created, err := cp.Create(ctx, js, ns)
	if err != nil {
		t.Fatal(err)
	}
	owner := metav1.OwnerReference{APIVersion: "jobset.x-k8s.io/v1alpha2", Kind: "JobSet", Name: created.GetName(), UID: created.GetUID(), Controller: ptr.To(true)}
	global := 0
	for _, rj := range []struct {
		name     string
		replicas int
	}{{"leader", 1}, {"workers", 2}} {
		for j := range rj.replicas {
			labels := map[string]any{
				"jobset.sigs.k8s.io/jobset-name":        created.GetName(),
				"jobset.sigs.k8s.io/replicatedjob-name": rj.name,
				"jobset.sigs.k8s.io/job-index":          fmt.Sprint(j),
				"jobset.sigs.k8s.io/job-global-index":   fmt.Sprint(global),
			}
			global++
			spec := jobSpec()
			spec["template"] = installPodTemplate("Never", labels)
			job := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "batch/v1", "kind": "Job",
				"metadata": map[string]any{"name": fmt.Sprintf("%s-%s-%d", created.GetName(), rj.name, j), "labels": labels},
				"spec":     spec}}
			job.SetOwnerReferences([]metav1.OwnerReference{owner})
			if _, err := cp.Create(ctx, job, ns); err != nil {
				t.Fatal(err)
			}
		}
	}
	return created.GetName()
}

// createInstallLWS creates a LeaderWorkerSet of one group of size 3 and, as
// its operator would, the leader StatefulSet (owned by the LWS) and, once
// the leader pod exists, the group's worker StatefulSet owned by the
// leader pod. The StatefulSet controller makes the pods. Returns its name.
func createInstallLWS(t *testing.T, cp *localcluster.ControlPlane, ns string) string {
	t.Helper()
	ctx := context.Background()
	const name = "serve"
	lws := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec": map[string]any{"replicas": int64(1), "leaderWorkerTemplate": map[string]any{
			"size": int64(3), "workerTemplate": installPodTemplate("Always", map[string]any{})}},
	}}
	created, err := cp.Create(ctx, lws, ns)
	if err != nil {
		t.Fatal(err)
	}
	sts := func(stsName string, replicas int64, labels map[string]any, owner metav1.OwnerReference) {
		t.Helper()
		obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "apps/v1", "kind": "StatefulSet",
			"metadata": map[string]any{"name": stsName},
			"spec": map[string]any{
				"replicas": replicas, "serviceName": name, "podManagementPolicy": "Parallel",
				"selector": map[string]any{"matchLabels": labels},
				"template": installPodTemplate("Always", labels),
			}}}
		obj.SetOwnerReferences([]metav1.OwnerReference{owner})
		if _, err := cp.Create(ctx, obj, ns); err != nil {
			t.Fatal(err)
		}
	}
	// One group (index 0): the leader's labels are fixed, which the
	// operator's pod webhook would otherwise set per pod.
	sts(name, 1, map[string]any{
		"leaderworkerset.sigs.k8s.io/name": name, "leaderworkerset.sigs.k8s.io/group-index": "0", "leaderworkerset.sigs.k8s.io/worker-index": "0",
	}, metav1.OwnerReference{APIVersion: "leaderworkerset.x-k8s.io/v1", Kind: "LeaderWorkerSet", Name: name, UID: created.GetUID(), Controller: ptr.To(true)})
	leaders, err := cp.WaitPodCount(ctx, ns, "leaderworkerset.sigs.k8s.io/worker-index=0", 1, localcluster.ShortTimeout)
	if err != nil {
		t.Fatal(err)
	}
	leader := leaders[0]
	sts(name+"-0", 2, map[string]any{
		"leaderworkerset.sigs.k8s.io/name": name, "leaderworkerset.sigs.k8s.io/group-index": "0", "leaderworkerset.sigs.k8s.io/worker-index": "1",
	}, metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: leader.Name, UID: leader.UID, Controller: ptr.To(true)})
	return name
}
