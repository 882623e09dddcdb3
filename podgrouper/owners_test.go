package podgrouper

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	metadatafake "k8s.io/client-go/metadata/fake"
	"k8s.io/klog/v2/ktesting"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestOwnerChain(t *testing.T) {
	// LeaderWorkerSet-shaped: worker pod → StatefulSet → leader pod →
	// StatefulSet → Trainer. Pods are owners too.
	stsGVK := schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "StatefulSet"}
	top := &obj{gvk: trainerGVK, name: "lws", uid: "u-lws"}
	leaderSts := &obj{gvk: stsGVK, name: "lws", uid: "u-sts", owner: top}
	leader := &obj{gvk: podGVK, name: "lws-0", uid: "u-leader", owner: leaderSts}
	workerSts := &obj{gvk: stsGVK, name: "lws-0", uid: "u-wsts", owner: leader}
	// A two-object loop, which a real cluster cannot build but a bug could.
	loopA := &obj{gvk: jobGVK, name: "a", uid: "u-a"}
	loopB := &obj{gvk: jobGVK, name: "b", uid: "u-b", owner: loopA}
	loopA.owner = loopB

	cases := []struct {
		name     string
		pod      *corev1.Pod
		maxDepth int
		want     []string
		wantErr  string
	}{
		{name: "through a leader pod", pod: makePod("lws-0-1", workerSts),
			want: []string{"Pod/ns/lws-0-1", "StatefulSet/ns/lws-0", "Pod/ns/lws-0", "StatefulSet/ns/lws", "Trainer/ns/lws"}},
		{name: "depth bound", pod: makePod("lws-0-1", workerSts), maxDepth: 2,
			want: []string{"Pod/ns/lws-0-1", "StatefulSet/ns/lws-0", "Pod/ns/lws-0"}},
		{name: "no owner", pod: makePod("bare", nil), want: []string{"Pod/ns/bare"}},
		{name: "loop", pod: makePod("l", loopA), wantErr: "loops"},
		{name: "owner with another uid", pod: makePod("s", &obj{gvk: stsGVK, name: "lws", uid: "u-other"}), wantErr: "owner is gone"},
		{name: "owner missing", pod: makePod("m", &obj{gvk: stsGVK, name: "nope", uid: "u-nope"}), wantErr: "owner is gone"},
		{name: "kind not served: chain ends", pod: makePod("k", &obj{gvk: schema.GroupVersionKind{Group: "x.io", Version: "v1", Kind: "Nope"}, name: "n", uid: "u-n"}), want: []string{"Pod/ns/k"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			scheme := runtime.NewScheme()
			if err := metav1.AddMetaToScheme(scheme); err != nil {
				t.Fatal(err)
			}
			var objs []runtime.Object
			for _, o := range []*obj{top, leaderSts, leader, workerSts, loopA, loopB} {
				objs = append(objs, o.meta())
			}
			md := metadatafake.NewSimpleMetadataClient(scheme, objs...)
			o := newOwners(testMapper(), md, nil, tc.maxDepth)
			chain, err := o.chain(ctx, tc.pod)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("chain error = %v, want one containing %q", err, tc.wantErr)
				}
				if tc.wantErr == "owner is gone" && !errors.Is(err, errOwnerGone) {
					t.Errorf("error %v does not wrap errOwnerGone", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, l := range chain {
				got = append(got, l.String())
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("chain (-want +got):\n%s", diff)
			}
			// A second walk is served from the cache: no more reads.
			before := len(md.Actions())
			if _, err := o.chain(ctx, tc.pod); err != nil {
				t.Fatal(err)
			}
			if n := len(md.Actions()) - before; n != 0 {
				t.Errorf("second walk made %d metadata reads, want 0", n)
			}
		})
	}
}
