package localcluster

import (
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

func TestMergeConfig(t *testing.T) {
	const base = "apiVersion: x/v1\nkind: Configuration\nleaderElection: {leaderElect: false}\n"
	for _, tc := range []struct {
		name, extra string
		want        map[string]any // keys that must be in the result
		err         string
	}{
		{name: "none", extra: "", want: map[string]any{"kind": "Configuration"}},
		{name: "added", extra: "waitForPodsReady: {timeout: 1m}\n", want: map[string]any{"kind": "Configuration", "waitForPodsReady": map[string]any{"timeout": "1m"}}},
		{name: "harness key", extra: "leaderElection: {leaderElect: true}\n", err: "leaderElection: set by the harness"},
		{name: "not a mapping", extra: "- a\n", err: "cannot unmarshal"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := mergeConfig(base, tc.extra)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got map[string]any
			if err := yaml.Unmarshal(out, &got); err != nil {
				t.Fatal(err)
			}
			for k, v := range tc.want {
				if g, ok := got[k]; !ok || yamlString(t, g) != yamlString(t, v) {
					t.Errorf("%s = %v, want %v", k, g, v)
				}
			}
			if got["leaderElection"] == nil {
				t.Errorf("the harness's leaderElection is gone: %s", out)
			}
		})
	}
}

func yamlString(t *testing.T, v any) string {
	t.Helper()
	b, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestOverlayConfig(t *testing.T) {
	const base = "namespace: kueue-system\ncontroller: {groupKindConcurrency: {Pod: 5}}\nintegrations: {frameworks: [batch/job]}\n"
	out, err := overlayConfig(base, "integrations: {frameworks: [pod]}\nwaitForPodsReady: {timeout: 20s}\n")
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := yaml.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{
		"namespace":        "kueue-system\n",
		"controller":       "groupKindConcurrency:\n  Pod: 5\n",
		"integrations":     "frameworks:\n- pod\n",
		"waitForPodsReady": "timeout: 20s\n",
	} {
		if g := yamlString(t, got[k]); g != want {
			t.Errorf("%s = %q, want %q", k, g, want)
		}
	}
	if _, err := overlayConfig(base, "- a\n"); err == nil {
		t.Error("a list as the overlay: no error")
	}
}
