package gang

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
)

func TestDecodeArgs(t *testing.T) {
	defaults := &Args{}
	SetDefaultsArgs(defaults)
	tests := []struct {
		name    string
		obj     runtime.Object
		want    *Args
		wantErr string
	}{
		{name: "nil gives defaults", obj: nil, want: defaults},
		{name: "empty JSON gives defaults", obj: &runtime.Unknown{Raw: []byte(`{}`)}, want: defaults},
		{
			name: "fields are kept, the rest defaulted",
			obj:  &runtime.Unknown{Raw: []byte(`{"permitTimeoutSeconds":5,"requirePodGrouper":false}`)},
			want: func() *Args {
				a := defaults.DeepCopy()
				a.PermitTimeoutSeconds = ptr.To[int32](5)
				a.RequirePodGrouper = ptr.To(false)
				return a
			}(),
		},
		{
			name: "YAML content type",
			obj:  &runtime.Unknown{ContentType: runtime.ContentTypeYAML, Raw: []byte("backoffSeconds: 0\n")},
			want: func() *Args { a := defaults.DeepCopy(); a.BackoffSeconds = ptr.To[int32](0); return a }(),
		},
		{name: "unknown field", obj: &runtime.Unknown{Raw: []byte(`{"permitTimeout":5}`)}, wantErr: `unknown field "permitTimeout"`},
		{name: "out of range", obj: &runtime.Unknown{Raw: []byte(`{"permitTimeoutSeconds":0,"partialGangGracePeriodSeconds":-1}`)},
			wantErr: "pluginConfig[MusterGang].args.permitTimeoutSeconds: Invalid value: 0: must be between 1 and 870"},
		{name: "bad annotation key", obj: &runtime.Unknown{Raw: []byte(`{"topologyRequiredAnnotation":"not a key"}`)},
			wantErr: "pluginConfig[MusterGang].args.topologyRequiredAnnotation: Invalid value"},
		{name: "same key twice", obj: &runtime.Unknown{Raw: []byte(`{"topologyRequiredAnnotation":"a/b","topologyPreferredAnnotation":"a/b"}`)},
			wantErr: "must differ from topologyRequiredAnnotation"},
		{name: "wrong type", obj: &runtime.Unknown{ContentType: "application/xml", Raw: []byte(`<x/>`)}, wantErr: "not supported"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := DecodeArgs(tc.obj)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("args (-want, +got):\n%s", diff)
			}
		})
	}
}

func TestDefaults(t *testing.T) {
	a := &Args{}
	SetDefaultsArgs(a)
	if *a.PermitTimeoutSeconds != 60 || *a.BackoffSeconds != 5 || *a.PartialGangGracePeriodSeconds != 30 ||
		*a.TopologyRequiredAnnotation != "muster.io/topology-required" || *a.TopologyPreferredAnnotation != "muster.io/topology-preferred" || !*a.RequirePodGrouper {
		t.Errorf("unexpected defaults: %+v", a)
	}
}
