package e2e

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/pflag"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	configv1 "k8s.io/kube-scheduler/config/v1"
	"sigs.k8s.io/yaml"

	"github.com/muster-io/muster/api"
	podgrouperapp "github.com/muster-io/muster/cmd/muster-podgrouper/app"
	sandboxapp "github.com/muster-io/muster/cmd/muster-sandbox/app"
	schedulerapp "github.com/muster-io/muster/cmd/muster-scheduler/app"
	"github.com/muster-io/muster/localcluster"
)

// TestSandboxNoMuster: `muster-sandbox --no-muster` is a cluster without
// muster. A gang waits there, neither grouped nor scheduled, until the
// developer's own pod-grouper and muster-scheduler run against the printed
// kubeconfig and scheduler configuration (here: their code in this
// process, on the printed arguments); then it is grouped and bound.
func TestSandboxNoMuster(t *testing.T) {
	sb := startSandbox(t, sandboxapp.Config{Nodes: 2, GPUsPerNode: 4, Zones: 1, NoExamples: true, NoMuster: true})
	ctx := context.Background()
	progress := sb.progress.String()
	t.Logf("progress:\n%s", progress)
	schedFile := noMusterCheckPrinted(ctx, t, sb, progress)
	data := noMusterSchedulerConfig(t, sb, schedFile)

	// A gang of two 4-GPU pods for muster-scheduler: nothing groups or
	// schedules it.
	n := int32(2)
	q := corev1.ResourceList{"nvidia.com/gpu": *resource.NewQuantity(4, resource.DecimalSI)}
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "pair", Annotations: map[string]string{api.AnnotationMinMember: "2"}},
		Spec: batchv1.JobSpec{Parallelism: &n, Completions: &n, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			SchedulerName: sandboxapp.SchedulerName, RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "c", Image: "registry.invalid/c", Resources: corev1.ResourceRequirements{Requests: q, Limits: q}}},
		}}},
	}
	if _, err := sb.kube.BatchV1().Jobs("default").Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	podsState := func(ok func(pods []corev1.Pod) bool) func(context.Context) (bool, string, error) {
		return noMusterPodsState(sb, batchv1.JobNameLabel+"=pair", ok)
	}
	waitFor(t, sandboxWait, "the Job's 2 pods", podsState(func(pods []corev1.Pod) bool { return len(pods) == 2 }))
	holdsFor(t, 3*time.Second, "no pod grouped or bound without muster", podsState(func(pods []corev1.Pod) bool {
		for _, p := range pods {
			if p.Spec.NodeName != "" || p.Labels[api.LabelPodGroup] != "" {
				return false
			}
		}
		return true
	}))

	stopOwn := startOwnMuster(ctx, t, sb, data, schedFile)
	waitFor(t, sandboxWait, "the gang grouped and bound by the developer's builds", podsState(func(pods []corev1.Pod) bool {
		for _, p := range pods {
			if p.Spec.NodeName == "" || p.Labels[api.LabelPodGroup] != "pair" {
				return false
			}
		}
		return len(pods) == 2
	}))
	stopOwn()

	if err := sb.stop(); err != nil {
		t.Fatalf("sandbox: %v", err)
	}
	for _, f := range []string{sb.kubeconfig, schedFile} {
		if _, err := os.Stat(f); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s left behind (%v)", f, err)
		}
	}
}

// noMusterCheckPrinted checks what a --no-muster sandbox says and runs,
// and returns the scheduler configuration file it wrote.
func noMusterCheckPrinted(ctx context.Context, t *testing.T, sb *runningSandbox, progress string) (schedFile string) {
	// The kubeconfig says what it points at.
	kc, err := clientcmd.LoadFromFile(sb.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if kc.CurrentContext != sandboxapp.KubeconfigContext || len(kc.Contexts) != 1 {
		t.Errorf("kubeconfig contexts %v, current %q; want only %q", slices.Collect(maps.Keys(kc.Contexts)), kc.CurrentContext, sandboxapp.KubeconfigContext)
	}

	// Neither muster component runs, and the three commands are printed.
	schedFile = filepath.Join(filepath.Dir(sb.kubeconfig), sandboxapp.SchedulerConfigFile)
	for _, absent := range []string{"muster-scheduler running", "pod-grouper running", "operator"} {
		if strings.Contains(progress, absent) {
			t.Errorf("progress says %q with --no-muster --no-examples", absent)
		}
	}
	for _, want := range []string{
		"go run ./cmd/muster-podgrouper --kubeconfig " + sb.kubeconfig,
		"go run ./cmd/muster-scheduler --config " + schedFile,
		"kubectl --kubeconfig " + sb.kubeconfig + " apply -n default -f examples/",
	} {
		if !strings.Contains(progress, want) {
			t.Errorf("progress lacks the command %q", want)
		}
	}
	if _, err := sb.kube.CoordinationV1().Leases("kube-system").Get(ctx, "muster-podgrouper", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("pod-grouper lease with --no-muster: want NotFound, got %v", err)
	}
	return schedFile
}

// noMusterSchedulerConfig reads schedFile and checks that it is the
// shipped profile, pointed at the sandbox.
func noMusterSchedulerConfig(t *testing.T, sb *runningSandbox, schedFile string) []byte {
	data, err := os.ReadFile(schedFile)
	if err != nil {
		t.Fatal(err)
	}
	var sc configv1.KubeSchedulerConfiguration
	if err := yaml.UnmarshalStrict(data, &sc); err != nil {
		t.Fatalf("%s: %v", schedFile, err)
	}
	if sc.ClientConnection.Kubeconfig != sb.kubeconfig || len(sc.Profiles) != 1 || *sc.Profiles[0].SchedulerName != sandboxapp.SchedulerName {
		t.Errorf("%s: kubeconfig %q, profiles %d; want %s and one profile %s", schedFile, sc.ClientConnection.Kubeconfig, len(sc.Profiles), sb.kubeconfig, sandboxapp.SchedulerName)
	}
	return data
}

// noMusterPodsState is a condition on the sandbox's default pods matching
// sel: ok of them, and their nodes and PodGroup labels.
func noMusterPodsState(sb *runningSandbox, sel string, ok func(pods []corev1.Pod) bool) func(context.Context) (bool, string, error) {
	return func(ctx context.Context) (bool, string, error) {
		list, err := sb.kube.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			return false, "", err
		}
		var seen []string
		for _, p := range list.Items {
			seen = append(seen, fmt.Sprintf("%s node=%q group=%q", p.Name, p.Spec.NodeName, p.Labels[api.LabelPodGroup]))
		}
		return ok(list.Items), strings.Join(seen, "; "), nil
	}
}

// startOwnMuster runs the developer's own pod-grouper and muster-scheduler
// against the sandbox, on the printed arguments; stop (also a cleanup)
// stops both.
// The pod-grouper is its command's flags and Run (not the
// cobra command: that applies its logging settings to the whole test
// process). The scheduler is kube-scheduler's app path with muster's
// plugins on the written configuration (data, from schedFile), through the
// harness, whose control plane only hosts it (its temp dir and logs): the
// configuration's kubeconfig points it at the sandbox. (kube-scheduler's
// own command stops only on a signal, so it cannot run in a test.)
func startOwnMuster(ctx context.Context, t *testing.T, sb *runningSandbox, data []byte, schedFile string) (stop func()) {
	runCtx, cancel := context.WithCancel(ctx)
	o := podgrouperapp.NewOptions()
	fs := pflag.NewFlagSet("muster-podgrouper", pflag.ContinueOnError)
	o.AddFlags(fs)
	if err := fs.Parse([]string{"--kubeconfig", sb.kubeconfig, "--bind-address=127.0.0.1:0"}); err != nil {
		cancel()
		t.Fatal(err)
	}
	pgDone := make(chan error, 1)
	go func() { pgDone <- podgrouperapp.Run(runCtx, o) }()
	stopSched, err := localcluster.StartSchedulerApp(runCtx, controlPlane, data, schedulerapp.Plugins()...)
	if err != nil {
		cancel()
		<-pgDone
		t.Fatalf("muster-scheduler on %s: %v", schedFile, err)
	}
	stopOwn := sync.OnceFunc(func() {
		stopSched()
		cancel()
		if err := <-pgDone; err != nil {
			t.Errorf("pod-grouper: %v", err)
		}
	})
	t.Cleanup(stopOwn)
	return stopOwn
}

// sandboxWait bounds one step of the no-muster sandbox test: a pod-grouper
// and a scheduler starting, then a gang of two.
const sandboxWait = time.Minute
