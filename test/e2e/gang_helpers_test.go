package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	configv1 "k8s.io/kube-scheduler/config/v1"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	"k8s.io/utils/ptr"
	schedv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	pgclientset "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned"
	"sigs.k8s.io/yaml"

	"github.com/muster-io/muster/api"
	"github.com/muster-io/muster/localcluster"
	"github.com/muster-io/muster/plugins/gang"
)

func init() {
	// The PodGroup CRD comes from the scheduler-plugins module itself, so the
	// test always runs against the schema the plugin's types were built for.
	registerSetup("PodGroup CRD", func(ctx context.Context, cp *localcluster.ControlPlane) error {
		dir, err := moduleDir("sigs.k8s.io/scheduler-plugins")
		if err != nil {
			return err
		}
		return cp.InstallCRDFile(ctx, filepath.Join(dir, "config", "crd", "bases", "scheduling.x-k8s.io_podgroups.yaml"))
	})
}

func moduleDir(mod string) (string, error) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", mod).Output()
	if err != nil {
		return "", fmt.Errorf("locating module %s: %w", mod, err)
	}
	return strings.TrimSpace(string(out)), nil
}

var (
	pgClientOnce sync.Once
	pgClient     pgclientset.Interface
)

func podGroups(t testing.TB) pgclientset.Interface {
	t.Helper()
	pgClientOnce.Do(func() {
		cfg := rest.CopyConfig(controlPlane.JSONConfig)
		c, err := pgclientset.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		pgClient = c
	})
	return pgClient
}

// schedulerConfig reads the shipped manifests/scheduler-config.yaml, renames
// its profile and overrides plugin args, so every gang test runs the profile
// that ships.
func schedulerConfig(t testing.TB, schedulerName string, args map[string]any) *configv1.KubeSchedulerConfiguration {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "manifests", "scheduler-config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg configv1.KubeSchedulerConfiguration
	if err := yaml.UnmarshalStrict(data, &cfg); err != nil {
		t.Fatalf("manifests/scheduler-config.yaml: %v", err)
	}
	if len(cfg.Profiles) != 1 || ptr.Deref(cfg.Profiles[0].SchedulerName, "") != "muster-scheduler" {
		t.Fatalf("manifests/scheduler-config.yaml: want one profile muster-scheduler")
	}
	if cfg.LeaderElection.ResourceName != "muster-scheduler" {
		t.Fatalf("manifests/scheduler-config.yaml: want its own lease muster-scheduler")
	}
	prof := &cfg.Profiles[0]
	prof.SchedulerName = ptr.To(schedulerName)
	for i := range prof.PluginConfig {
		pc := &prof.PluginConfig[i]
		if pc.Name != gang.Name {
			continue
		}
		merged := map[string]any{}
		if err := json.Unmarshal(pc.Args.Raw, &merged); err != nil {
			t.Fatal(err)
		}
		for k, v := range args {
			merged[k] = v
		}
		raw, err := json.Marshal(merged)
		if err != nil {
			t.Fatal(err)
		}
		pc.Args = runtime.RawExtension{Raw: raw}
	}
	// Quick retries keep the tests short; the barrier logic is the same.
	cfg.PodInitialBackoffSeconds = ptr.To[int64](1)
	cfg.PodMaxBackoffSeconds = ptr.To[int64](1)
	return &cfg
}

// startGangScheduler runs a scheduler with the shipped profile under
// schedulerName; stop is also registered as a cleanup.
func startGangScheduler(t testing.TB, schedulerName string, args map[string]any) (stop func()) {
	t.Helper()
	stop, err := localcluster.StartScheduler(context.Background(), controlPlane, localcluster.SchedulerOptions{
		Config:            schedulerConfig(t, schedulerName, args),
		OutOfTreeRegistry: frameworkruntime.Registry{gang.Name: newObservedGang},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return stop
}

func createPodGroup(t testing.TB, ns, name string, minMember int32, annotations map[string]string) *schedv1alpha1.PodGroup {
	t.Helper()
	pg, err := podGroups(t).SchedulingV1alpha1().PodGroups(ns).Create(context.Background(), &schedv1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations},
		Spec:       schedv1alpha1.PodGroupSpec{MinMember: minMember},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return pg
}

type podSpec struct {
	name, scheduler, pool, gang string
	gpus                        int64
	annotations                 map[string]string
	mutate                      func(*corev1.Pod)
}

func makePod(ns string, s podSpec) *corev1.Pod {
	req := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}
	if s.gpus > 0 {
		req[localcluster.DefaultGPUResource] = *resource.NewQuantity(s.gpus, resource.DecimalSI)
	}
	sel, tol := localcluster.PoolPlacement(s.pool)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: s.name, Labels: map[string]string{"test": "gang"}, Annotations: s.annotations},
		Spec: corev1.PodSpec{
			SchedulerName: s.scheduler,
			NodeSelector:  sel,
			Tolerations:   []corev1.Toleration{tol},
			Containers: []corev1.Container{{
				Name: "c", Image: "registry.invalid/none",
				Resources: corev1.ResourceRequirements{Requests: req, Limits: req},
			}},
		},
	}
	if s.gang != "" {
		pod.Labels[api.LabelPodGroup] = s.gang
		pod.Labels["gang"] = s.gang
	}
	if s.mutate != nil {
		s.mutate(pod)
	}
	return pod
}

func createGangPods(t testing.TB, ns string, n int, s podSpec) {
	t.Helper()
	base := s.name
	for i := range n {
		s.name = fmt.Sprintf("%s-%d", base, i)
		if _, err := controlPlane.Client.CoreV1().Pods(ns).Create(context.Background(), makePod(ns, s), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// boundByGang counts live bound pods per gang label in ns.
func boundByGang(ctx context.Context, ns string) (bound, total map[string]int, err error) {
	return podsByLabel(ctx, controlPlane, ns, "gang")
}

func waitGangBound(t testing.TB, ns, gangName string, n int, timeout time.Duration) {
	t.Helper()
	if _, err := controlPlane.WaitPodsBound(context.Background(), ns, "gang="+gangName, n, timeout); err != nil {
		t.Fatal(err)
	}
}

// waitUnschedulable waits until pod ns/name is Unschedulable with a
// message that contains contains, and returns its PodScheduled condition.
func waitUnschedulable(t testing.TB, ns, name, contains string, timeout time.Duration) corev1.PodCondition {
	t.Helper()
	return waitNotScheduled(t, ns, name, "Unschedulable: …"+contains+"…", timeout, func(c corev1.PodCondition) bool {
		return c.Reason == corev1.PodReasonUnschedulable && strings.Contains(c.Message, contains)
	})
}

// waitUnschedulableAny waits for PodScheduled=False on a pod, any reason.
func waitUnschedulableAny(t testing.TB, ns, name string, timeout time.Duration) corev1.PodCondition {
	t.Helper()
	return waitNotScheduled(t, ns, name, "any reason", timeout, func(corev1.PodCondition) bool { return true })
}

// waitNotScheduled waits until pod ns/name has PodScheduled=False and ok
// holds of that condition (what says what ok wants), and returns it.
func waitNotScheduled(t testing.TB, ns, name, what string, timeout time.Duration, ok func(corev1.PodCondition) bool) corev1.PodCondition {
	t.Helper()
	var last corev1.PodCondition
	waitFor(t, timeout, fmt.Sprintf("pod %s/%s PodScheduled=False (%s)", ns, name, what), func(ctx context.Context) (bool, string, error) {
		c, found, err := podCondition(ctx, ns, name, corev1.PodScheduled)
		if err != nil {
			return false, "", err
		}
		if !found {
			return false, "no PodScheduled condition", nil
		}
		last = c
		return c.Status == corev1.ConditionFalse && ok(c), fmt.Sprintf("%s %s: %s", c.Status, c.Reason, c.Message), nil
	})
	return last
}
