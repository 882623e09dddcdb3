package operators

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestParseOperatorSpec(t *testing.T) {
	const file = "ops/x/operator.yaml"
	// Each case appends to or replaces parts of a valid spec of an operator
	// with webhooks and a Configuration file.
	const head = "module: example.com/op\nmainPackage: example.com/op/cmd\ncrdDir: config/crd\n"
	const hooks = "webhooks: config/webhook.yaml\nconfigAPI: config.example.com/v1\npodLabel: example.com/name\n"
	const args = "args:\n- --kubeconfig={{kubeconfig}}\n- --config={{config}}\n- --probe={{probe}}\n"
	run := Run{Kubeconfig: "/tmp/kc", Config: "/tmp/cfg.yaml", Probe: "127.0.0.1:9"}
	for _, tc := range []struct {
		name string
		yaml string
		want []string // the command for run
		err  string   // the error names the file and this
	}{
		{
			name: "webhooks and Configuration",
			yaml: head + hooks + args,
			want: []string{"--kubeconfig=/tmp/kc", "--config=/tmp/cfg.yaml", "--probe=127.0.0.1:9"},
		},
		{
			name: "flags only, fixed args kept, placeholders repeated",
			yaml: head + "args: [run, '--kubeconfig={{kubeconfig}}', '--addr={{probe}},{{probe}}', --leader-elect=false]\n",
			want: []string{"run", "--kubeconfig=/tmp/kc", "--addr=127.0.0.1:9,127.0.0.1:9", "--leader-elect=false"},
		},
		{
			name: "Configuration without webhooks need not pass the probe",
			yaml: head + "configAPI: config.example.com/v1\nargs: ['--kubeconfig={{kubeconfig}}', '--config={{config}}']\n",
			want: []string{"--kubeconfig=/tmp/kc", "--config=/tmp/cfg.yaml"},
		},
		{name: "unknown field", yaml: head + hooks + args + "podLabels: x\n", err: `unknown field "podLabels"`},
		{name: "misspelt field", yaml: strings.Replace(head, "crdDir", "crdDirectory", 1) + hooks + args, err: `unknown field "crdDirectory"`},
		{name: "duplicate field", yaml: head + hooks + args + "module: example.com/other\n", err: `"module"`},
		{name: "args not a list", yaml: head + hooks + "args: --kubeconfig={{kubeconfig}}\n", err: "args"},
		{name: "no module", yaml: strings.Replace(head, "module: example.com/op\n", "", 1) + hooks + args, err: "module: required"},
		{name: "no mainPackage", yaml: strings.Replace(head, "mainPackage: example.com/op/cmd\n", "", 1) + hooks + args, err: "mainPackage: required"},
		{name: "no crdDir", yaml: strings.Replace(head, "crdDir: config/crd\n", "", 1) + hooks + args, err: "crdDir: required"},
		{name: "no args", yaml: head + hooks, err: "args: required"},
		{name: "empty args", yaml: head + hooks + "args: []\n", err: "args: required"},
		{name: "unknown placeholder", yaml: head + hooks + args + "- --port={{port}}\n", err: "args[3]: unknown placeholder {{port}}"},
		{name: "spaced placeholder", yaml: head + hooks + args + "- '--x={{ probe }}'\n", err: "args[3]: unknown placeholder {{ probe }}"},
		{name: "unclosed placeholder", yaml: head + hooks + args + "- '--x={{probe}'\n", err: "args[3]: malformed placeholder"},
		{name: "stray braces", yaml: head + hooks + args + "- '--x={{probe}}}}'\n", err: "args[3]: malformed placeholder"},
		{name: "no kubeconfig", yaml: head + "args: ['--probe={{probe}}']\n", err: "args: no {{kubeconfig}}"},
		{name: "config without configAPI", yaml: head + "args: ['--kubeconfig={{kubeconfig}}', '--config={{config}}', '--probe={{probe}}']\n", err: "{{config}} needs configAPI"},
		{name: "configAPI never passed", yaml: head + hooks + "args: ['--kubeconfig={{kubeconfig}}']\n", err: "no arg passes {{config}}"},
		{name: "nothing to wait on", yaml: head + "args: ['--kubeconfig={{kubeconfig}}']\n", err: "args: no {{probe}}"},
		{name: "webhooks without configAPI", yaml: head + "webhooks: config/webhook.yaml\nargs: ['--kubeconfig={{kubeconfig}}', '--probe={{probe}}']\n", err: "webhooks: needs configAPI"},
		{
			name: "config and source patches",
			yaml: head + hooks + args + "config: |\n  integrations: {frameworks: [batch/job]}\nsourcePatches:\n- {file: cmd/main.go, replace: '\"/etc/x\"', with: 'dir'}\n",
			want: []string{"--kubeconfig=/tmp/kc", "--config=/tmp/cfg.yaml", "--probe=127.0.0.1:9"},
		},
		{name: "config without configAPI", yaml: head + "config: 'a: 1'\nargs: ['--kubeconfig={{kubeconfig}}', '--probe={{probe}}']\n", err: "config: needs configAPI"},
		{name: "config not a mapping", yaml: head + hooks + args + "config: '[1, 2]'\n", err: "config: "},
		{name: "patch without replace", yaml: head + hooks + args + "sourcePatches: [{file: cmd/main.go, with: x}]\n", err: "sourcePatches[0]: file and replace are required"},
		{name: "crd file in a subdirectory", yaml: head + hooks + args + "crdFiles: [sub/x.yaml]\n", err: "crdFiles[0]"},
		{name: "crd file not yaml", yaml: head + hooks + args + "crdFiles: [x.json]\n", err: "crdFiles[0]"},
		{name: "patch outside the module", yaml: head + hooks + args + "sourcePatches: [{file: ../x.go, replace: a, with: b}]\n", err: "must be a path inside the module"},
		{name: "podLabel without webhooks", yaml: head + "podLabel: example.com/name\nargs: ['--kubeconfig={{kubeconfig}}', '--probe={{probe}}']\n", err: "podLabel: only pod webhooks use it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec, err := Parse(file, []byte(tc.yaml))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), file+": ") || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one naming %s and %q", err, file, tc.err)
				}
				t.Log(err)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := spec.Command(run); !slices.Equal(got, tc.want) {
				t.Errorf("command %q, want %q", got, tc.want)
			}
		})
	}
}

// TestShippedOperators checks the operator.yaml files in the tree: every
// operator module has one (or Operators would silently leave it out) and
// each decodes and validates.
func TestShippedOperators(t *testing.T) {
	dir, err := dir()
	if err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var modules []string
	for _, e := range entries {
		if _, err := os.Stat(filepath.Join(dir, e.Name(), "go.mod")); err == nil {
			modules = append(modules, e.Name())
		}
	}
	names := Names()
	if len(names) == 0 || !slices.Equal(names, modules) {
		t.Fatalf("Names() = %v, want the operator modules %v", names, modules)
	}
	for _, name := range names {
		spec, opDir, err := Get(name)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if opDir != filepath.Join(dir, name) {
			t.Errorf("%s: directory %s, want %s", name, opDir, filepath.Join(dir, name))
		}
		for _, arg := range spec.Command(Run{Kubeconfig: "K", Config: "C", Probe: "P"}) {
			if strings.Contains(arg, "{{") {
				t.Errorf("%s: placeholder left in %q", name, arg)
			}
		}
	}
	if _, _, err := Get("no-such-operator"); err == nil || !strings.Contains(err.Error(), strings.Join(names, ", ")) {
		t.Errorf("unknown operator: error %v, want one listing %v", err, names)
	}
}
