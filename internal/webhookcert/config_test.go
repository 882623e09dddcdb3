package webhookcert

import (
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
)

func TestNewValidates(t *testing.T) {
	day := 24 * time.Hour
	cases := []struct {
		name    string
		nilKube bool
		cfg     func(*Config)
		wantErr []string // each must be in the error; none: no error
	}{
		{name: "valid"},
		{name: "an IP is a valid name", cfg: func(c *Config) { c.DNSNames = []string{"127.0.0.1", "::1"} }},
		{name: "no WebhookConfiguration is valid", cfg: func(c *Config) { c.WebhookConfiguration = "" }},
		{name: "CertDir needs nothing else, not even a client", nilKube: true,
			cfg: func(c *Config) { *c = Config{CertDir: t.TempDir()} }},
		{name: "a client is needed without CertDir", nilKube: true, wantErr: []string{"a Kubernetes client is required"}},
		{name: "Secret fields are required", cfg: func(c *Config) { c.SecretNamespace, c.SecretName = "", "" },
			wantErr: []string{"SecretNamespace: required", "SecretName: required"}},
		{name: "bad names", cfg: func(c *Config) {
			c.SecretNamespace, c.SecretName, c.WebhookConfiguration = "Muster", "a/b", "x_y"
		}, wantErr: []string{`SecretNamespace: "Muster" is not a namespace name`, `SecretName: "a/b" is not a Secret name`, `WebhookConfiguration: "x_y"`}},
		{name: "no DNS names", cfg: func(c *Config) { c.DNSNames = nil }, wantErr: []string{"DNSNames: at least one name"}},
		{name: "a DNS name that is neither", cfg: func(c *Config) { c.DNSNames = []string{"svc_name.ns"} },
			wantErr: []string{`DNSNames: "svc_name.ns" is neither an IP address nor a DNS name`}},
		{name: "negative durations", cfg: func(c *Config) { c.Validity, c.RenewBefore = -day, -day },
			wantErr: []string{"Validity: -24h0m0s is negative", "RenewBefore: -24h0m0s is negative"}},
		{name: "RenewBefore not shorter than Validity", cfg: func(c *Config) { c.Validity, c.RenewBefore = 10*day, 10*day },
			wantErr: []string{"RenewBefore: 240h0m0s is not shorter than Validity 240h0m0s"}},
		{name: "a serving certificate longer than its CA", cfg: func(c *Config) { c.Validity, c.CAValidity = 100*day, 50*day },
			wantErr: []string{"Validity: 2400h0m0s is longer than CAValidity 1200h0m0s"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			cfg := e.config()
			if tc.cfg != nil {
				tc.cfg(&cfg)
			}
			var client kubernetes.Interface = fake.NewClientset()
			if tc.nilKube {
				client = nil
			}
			m, err := New(client, cfg)
			if len(tc.wantErr) == 0 {
				if err != nil || m == nil {
					t.Fatalf("New: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("New accepted %+v", cfg)
			}
			for _, want := range tc.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
			}
		})
	}
}

func TestConfigDefaults(t *testing.T) {
	cfg := Config{DNSNames: []string{"B.example.com", "a.example.com", "b.example.com", " 127.0.0.1"}}.withDefaults()
	if cfg.Validity != DefaultValidity || cfg.CAValidity != DefaultCAValidity || cfg.RenewBefore != DefaultRenewBefore || cfg.Clock == nil {
		t.Errorf("defaults not applied: %+v", cfg)
	}
	if want := []string{"127.0.0.1", "a.example.com", "b.example.com"}; !slices.Equal(cfg.DNSNames, want) {
		t.Errorf("DNSNames %v, want %v", cfg.DNSNames, want)
	}
	dns, ips := cfg.sans()
	if len(dns) != 2 || len(ips) != 1 || ips[0].String() != "127.0.0.1" {
		t.Errorf("sans: dns %v ips %v", dns, ips)
	}
}
