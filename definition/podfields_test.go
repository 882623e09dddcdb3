package definition

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/muster-io/muster/definition/jq"
)

// What the pod-side expressions see of a partly built pod (and through the
// direct metadata reads) is what they see of the fully converted pod:
// same values, same errors.
func TestPartialPodSameResults(t *testing.T) {
	yes := true
	full := benchPods(1)[0]
	full.Finalizers = []string{"f"}
	full.Generation = 3
	full.GenerateName = "train-"
	full.OwnerReferences[0].Controller = &yes
	full.DeletionTimestamp = &metav1.Time{Time: time.Unix(1700000100, 0)}
	full.Kind, full.APIVersion = "Pod", "v1"
	emptyMaps := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "e", Labels: map[string]string{}, Annotations: map[string]string{}}}
	emptyValue := podT("ev", "app=", "x=1")
	pods := []*corev1.Pod{{}, emptyMaps, emptyValue, podT("p", "app=a", "lws/name=g"), full}
	srcs := []string{
		`.metadata.labels["app"]`, `.metadata.labels.app`, `.metadata.labels`, `.metadata.annotations["batch.kubernetes.io/job-completion-index"]`,
		`.metadata.name`, `.metadata.namespace`, `.metadata.uid`, `.metadata.resourceVersion`, `.metadata.generateName`,
		`.metadata.generation`, `.metadata.finalizers`, `.metadata.ownerReferences`, `.metadata.ownerReferences[0].controller`,
		`.metadata.creationTimestamp`, `.metadata.deletionTimestamp`, `.metadata.managedFields`, `.metadata.nope`,
		`.metadata`, `.metadata | keys`, `.metadata | length`, `.metadata.labels | length`, `.metadata.labels | keys`,
		`.metadata.labels["lws/name"] == null and .metadata.labels.app != null`,
		`.metadata.labels["x"] | select(. != null and . != "0")`,
		`.metadata.name.x`, `.metadata.labels.app.x`, `.metadata.ownerReferences.x`, `.metadata.labels[0]`,
		`.spec.containers[0].name`, `.spec.nodeName`, `.status.phase`, `.status`, `.kind`, `.apiVersion`, `.nope`, `.nope.x`,
		`.`, `keys`, `[.metadata.name, .spec.schedulerName]`, `.metadata.ownerReferences[]? | select(.controller) | .name`,
	}
	c := &Compiled{opts: Options{Timeout: 10 * time.Second}.withDefaults()}
	for pi, pod := range pods {
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(pod)
		if err != nil {
			t.Fatal(err)
		}
		whole := jq.ValueInPlace(u)
		for _, src := range srcs {
			e, fe := compileJQ(field.NewPath("x"), src)
			if fe != nil {
				t.Fatalf("%s: %v", src, fe)
			}
			n := &jq.Reads{}
			n.Add(e.code)
			want, wantErr := evalGojq(c, e, whole)
			got, gotErr := c.evalPod(ctxT, e, &podInput{pod: pod, needs: n})
			if diff := cmp.Diff(want, got); diff != "" || errText(wantErr) != errText(gotErr) {
				t.Errorf("pod %d, %s (needs %s): got %v, %v; want %v, %v", pi, src, n, got, gotErr, want, wantErr)
			}
		}
	}
}

// evalGojq is the reference for the shortcuts: e's compiled code run by gojq,
// never a plain path walked by hand nor a field read from the pod.
func evalGojq(c *Compiled, e *expr, input any) ([]any, error) {
	general := *e
	general.simple, general.pod = false, podFieldNone
	return c.eval(ctxT, &general, input)
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// A constant path walked by hand gives what gojq gives, errors included.
func TestSimplePathSameAsJQ(t *testing.T) {
	inputs := []any{nil, "s", 3, []any{1}, map[string]any{"a": nil}, map[string]any{"a": "x"},
		map[string]any{"a": map[string]any{"b": []any{1}}}, map[string]any{"a": map[string]any{"b": map[string]any{"c": true}}}}
	c := &Compiled{opts: Options{Timeout: 10 * time.Second}.withDefaults()}
	for _, src := range []string{`.`, `.a`, `.a.b`, `.a.b.c`, `.a["b"].c.d`} {
		e, fe := compileJQ(field.NewPath("x"), src)
		if fe != nil || !e.simple {
			t.Fatalf("%s: %v simple %v", src, fe, e.simple)
		}
		for _, in := range inputs {
			want, wantErr := evalGojq(c, e, in)
			got, gotErr := c.eval(ctxT, e, in)
			if diff := cmp.Diff(want, got); diff != "" || errText(wantErr) != errText(gotErr) {
				t.Errorf("%s on %v: got %v, %v; want %v, %v", src, in, got, gotErr, want, wantErr)
			}
		}
	}
}

// The pod-grouper asks MatchPod then GangForPod about the same pod; the
// second answer reuses the first, and a new pod version is matched again.
func TestMatchMemoFollowsPodVersion(t *testing.T) {
	c := compileT(t, jobsetDef)
	pod := podT("p", "jobset.sigs.k8s.io/jobset-name=train", "jobset.sigs.k8s.io/replicatedjob-name=workers", "jobset.sigs.k8s.io/job-index=0")
	pod.UID, pod.ResourceVersion = "u", "1"
	m, err := c.MatchPod(ctxT, pod)
	if err != nil || m.Instance != "workers" {
		t.Fatalf("match %v %v", m, err)
	}
	m.Instance = "changed by the caller"
	pod2 := pod.DeepCopy()
	pod2.Labels["jobset.sigs.k8s.io/replicatedjob-name"] = "leader"
	for _, tc := range []struct {
		pod  *corev1.Pod
		rv   string
		want string
	}{{pod, "1", "workers"}, {pod2, "1", "workers"}, {pod2, "2", "leader"}} {
		tc.pod.ResourceVersion = tc.rv
		m, err := c.MatchPod(ctxT, tc.pod)
		if err != nil || m.Instance != tc.want {
			t.Errorf("rv %s: instance %v (%v), want %s", tc.rv, m, err, tc.want)
		}
	}
}

func TestCompiledPodNeeds(t *testing.T) {
	for _, tc := range []struct{ def, want string }{
		{jobsetDef, "[.metadata.labels]"},
		{lwsDef, "[.metadata.labels]"},
		{twoShapesDef, "[.metadata.labels]"},
	} {
		if got := compileT(t, tc.def).podNeeds.String(); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.def[:60], got, tc.want)
		}
	}
}

// Concurrent callers share the compiled definition, the plan cache and the
// last-pod memo; each must get its own pod's answer (run with -race).
func TestGangForPodConcurrent(t *testing.T) {
	c := compileT(t, nimLikeDef)
	root := objT(t, nimLikeObj)
	pods := nimLikePods(16)
	done := make(chan error)
	for w := range 4 {
		go func() {
			for i := range 200 {
				pod := pods[(i+w)%len(pods)]
				m, err := c.MatchPod(ctxT, pod)
				if err != nil {
					done <- err
					return
				}
				g, err := c.GangForPod(ctxT, root, pod)
				if err != nil {
					done <- err
					return
				}
				wantComp := "worker"
				if pod.Labels["leaderworkerset.sigs.k8s.io/worker-index"] == "0" {
					wantComp = "leader"
				}
				if m.Component != wantComp || m.Replica != pod.Labels["leaderworkerset.sigs.k8s.io/group-index"] ||
					g.MinMember != 4 || len(g.Keys) != 1 || g.Keys[0] != m.Replica {
					done <- fmt.Errorf("pod %s: match %+v gang %+v", pod.Name, m, g)
					return
				}
			}
			done <- nil
		}()
	}
	for range 4 {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}
