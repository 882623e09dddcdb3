package app

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"
)

func TestKubeconfigPath(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "sched.yaml")
	if err := os.WriteFile(cfg, []byte("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nclientConnection:\n  kubeconfig: /etc/k/admin.conf\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		args    []string
		want    string
		wantErr bool
	}{
		{"flag wins", []string{"--config", cfg, "--kubeconfig=/x"}, "/x", false},
		{"from the config file", []string{"--config=" + cfg}, "/etc/k/admin.conf", false},
		{"in-cluster", []string{"--v=2"}, "", false},
		{"missing config file", []string{"--config", filepath.Join(dir, "nope")}, "", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := KubeconfigPath(tc.args)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err %v, wantErr %v", err, tc.wantErr)
			}
			if got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestWithFeatureGate(t *testing.T) {
	tests := []struct {
		name   string
		args   []string
		serves bool
		want   []string
	}{
		{"not served", []string{"--v=2"}, false, []string{"--v=2"}},
		{"served", []string{"--v=2"}, true, []string{"--v=2", "--feature-gates=GenericWorkload=true"}},
		{"operator's choice wins", []string{"--feature-gates=Foo=true,GenericWorkload=false"}, true, []string{"--feature-gates=Foo=true,GenericWorkload=false"}},
		{"other gates kept", []string{"--feature-gates", "Foo=true"}, true, []string{"--feature-gates", "Foo=true", "--feature-gates=GenericWorkload=true"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, WithFeatureGate(tc.args, tc.serves)); diff != "" {
				t.Errorf("(-want, +got):\n%s", diff)
			}
		})
	}
}

func fakeDiscovery(resources ...*metav1.APIResourceList) func(*rest.Config) (discovery.DiscoveryInterface, error) {
	return func(*rest.Config) (discovery.DiscoveryInterface, error) {
		return &fakediscovery.FakeDiscovery{Fake: &k8stesting.Fake{Resources: resources}}, nil
	}
}

func TestDecide(t *testing.T) {
	dir := t.TempDir()
	kc := filepath.Join(dir, "kc")
	if err := os.WriteFile(kc, []byte("apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: 'https://127.0.0.1:1'}\ncontexts:\n- name: c\n  context: {cluster: c, user: u}\ncurrent-context: c\nusers:\n- name: u\n  user: {token: t}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	served := &metav1.APIResourceList{GroupVersion: NativeGroupVersion, APIResources: []metav1.APIResource{{Name: "podgroups"}, {Name: "workloads"}}}
	args, _ := Decide(context.Background(), []string{"--kubeconfig", kc}, fakeDiscovery(served))
	if diff := cmp.Diff([]string{"--kubeconfig", kc, "--feature-gates=GenericWorkload=true"}, args); diff != "" {
		t.Errorf("served (-want, +got):\n%s", diff)
	}
	args, _ = Decide(context.Background(), []string{"--kubeconfig", kc}, fakeDiscovery())
	if diff := cmp.Diff([]string{"--kubeconfig", kc}, args); diff != "" {
		t.Errorf("not served (-want, +got):\n%s", diff)
	}
	// The operator turned the gate off: kept, and the log says so.
	off := []string{"--kubeconfig", kc, "--feature-gates=GenericWorkload=false"}
	args, msg := Decide(context.Background(), off, fakeDiscovery(served))
	if diff := cmp.Diff(off, args); diff != "" || !strings.Contains(msg, "as --feature-gates sets it") {
		t.Errorf("operator's choice (-want, +got):\n%s (msg %q)", diff, msg)
	}
	// An unreachable apiserver: start anyway, without the gate.
	args, msg = Decide(context.Background(), []string{"--kubeconfig", kc}, NewDiscovery)
	if diff := cmp.Diff([]string{"--kubeconfig", kc}, args); diff != "" || msg == "" {
		t.Errorf("unreachable (-want, +got):\n%s (msg %q)", diff, msg)
	}
}
