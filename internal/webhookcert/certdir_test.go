package webhookcert

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// pair issues a CA and a serving certificate as cert-manager would.
func pair(t *testing.T) *material {
	t.Helper()
	now := time.Now()
	ca, err := newAuthority(now, DefaultCAValidity)
	if err != nil {
		t.Fatal(err)
	}
	mat, err := ca.issue(now, DefaultValidity, []string{testDNS}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return mat
}

// writeFile writes data with a modification time of its own, so a change is
// seen even where the file system's time stamps are coarse.
func writeFile(t *testing.T, path string, data []byte, mtime time.Time) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(path, mtime, mtime); err != nil {
		t.Fatal(err)
	}
}

func served(t *testing.T, m *Manager) []byte {
	t.Helper()
	c, err := m.GetCertificate(nil)
	if err != nil {
		t.Fatalf("GetCertificate: %v", err)
	}
	return c.Certificate[0]
}

// CertDir mode follows the files in place, one file at a time, and the
// kubelet's atomic swap of a Secret volume.
func TestCertDir(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	m, err := New(nil, Config{CertDir: dir})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if err := m.Ensure(e.ctx); err == nil || !strings.Contains(err.Error(), dir) {
		t.Fatalf("Ensure on an empty CertDir: %v, want an error naming it", err)
	}
	if _, err := m.GetCertificate(nil); err == nil {
		t.Fatalf("GetCertificate serves from an empty CertDir")
	}

	mtime := time.Now().Add(-time.Hour)
	step := func() time.Time { mtime = mtime.Add(time.Minute); return mtime }
	a := pair(t)
	writeFile(t, filepath.Join(dir, KeyCert), a.certPEM, step())
	writeFile(t, filepath.Join(dir, KeyKey), a.keyPEM, step())
	if err := m.Ensure(e.ctx); err != nil {
		t.Fatalf("Ensure: %v", err)
	}
	if !bytes.Equal(served(t, m), a.cert.Certificate[0]) {
		t.Fatalf("not serving the files' certificate")
	}
	if m.CABundle() != nil {
		t.Errorf("CABundle() without a ca.crt: %q", m.CABundle())
	}
	if st := m.Status(); st.Injection != InjectionNotConfigured || !st.NotAfter.Equal(a.cert.Leaf.NotAfter) {
		t.Errorf("status %+v", st)
	}

	// The certificate first, its key later: the old pair stays until both
	// are there, and Ensure says what is wrong meanwhile.
	b := pair(t)
	writeFile(t, filepath.Join(dir, KeyCert), b.certPEM, step())
	if !bytes.Equal(served(t, m), a.cert.Certificate[0]) {
		t.Fatalf("a certificate without its key is served")
	}
	if err := m.Ensure(e.ctx); err == nil || !strings.Contains(err.Error(), "tls.crt and tls.key") {
		t.Fatalf("Ensure with a mismatched pair: %v", err)
	}
	writeFile(t, filepath.Join(dir, KeyKey), b.keyPEM, step())
	writeFile(t, filepath.Join(dir, KeyCACert), b.caBundle, step())
	if !bytes.Equal(served(t, m), b.cert.Certificate[0]) {
		t.Fatalf("the new pair is not served on the next handshake")
	}
	if !bytes.Equal(m.CABundle(), b.caBundle) {
		t.Errorf("CABundle() is not the directory's ca.crt")
	}

	// A Secret volume: the files are links through ..data, swapped at once.
	vol := t.TempDir()
	volume := func(name string, mat *material) {
		ts := filepath.Join(vol, name)
		if err := os.Mkdir(ts, 0o700); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(ts, KeyCert), mat.certPEM, step())
		writeFile(t, filepath.Join(ts, KeyKey), mat.keyPEM, step())
		if err := os.Symlink(name, filepath.Join(vol, "..data_tmp")); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(filepath.Join(vol, "..data_tmp"), filepath.Join(vol, "..data")); err != nil {
			t.Fatal(err)
		}
	}
	c, d := pair(t), pair(t)
	volume("..2031_01", c)
	for _, f := range []string{KeyCert, KeyKey} {
		if err := os.Symlink(filepath.Join("..data", f), filepath.Join(vol, f)); err != nil {
			t.Fatal(err)
		}
	}
	mv, err := New(nil, Config{CertDir: vol})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(served(t, mv), c.cert.Certificate[0]) {
		t.Fatalf("not serving the volume's certificate")
	}
	volume("..2031_02", d)
	if !bytes.Equal(served(t, mv), d.cert.Certificate[0]) {
		t.Fatalf("not serving the swapped volume's certificate")
	}
}
