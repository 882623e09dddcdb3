package manifestrender

import (
	"slices"
	"strings"
	"testing"
)

func TestDecode(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in      string
		want    []string // Key of each object
		wantErr string
	}{
		{name: "empty", in: "", want: nil},
		{
			name: "documents, empty ones dropped",
			in: "---\n# only a comment\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: ns}\n" +
				"---\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: b, namespace: ns}\n",
			want: []string{"/ConfigMap/ns/a", "apps/Deployment/ns/b"},
		},
		{
			name: "a separator inside a block scalar is data",
			in:   "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata:\n  f: |\n    x\n    ---\n    y\n",
			want: []string{"/ConfigMap//a"},
		},
		{
			name:    "no kind",
			in:      "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\napiVersion: v1\nmetadata: {name: b}\n",
			wantErr: `document 2 ("b"): apiVersion and kind are required`,
		},
		{name: "not YAML", in: "a: [\n", wantErr: "document 1:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs, err := Decode([]byte(tc.in))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, o := range objs {
				got = append(got, Key(o))
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("objects %q, want %q", got, tc.want)
			}
		})
	}
}
