package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// identity is a client of the API server: a certificate (CN = user, O = groups) and a
// kubeconfig that uses it.
type identity struct {
	name, user string
	groups     []string
}

// runPKI makes, once, the plane's certificate authority, the API server's serving certificate,
// the service-account signing key, and one client certificate with its kubeconfig per identity
// (--client NAME=USER[/GROUP,...]). Files that exist are kept, so a second run changes nothing.
func runPKI(args []string) int {
	fs := flag.NewFlagSet("pki", flag.ContinueOnError)
	dir := fs.String("dir", "", "folder for the keys and certificates")
	server := fs.String("server", "", "the API server's URL, e.g. https://127.0.0.1:17602")
	serviceIP := fs.String("service-ip", "", "the kubernetes Service's cluster IP")
	var clients multiFlag
	fs.Var(&clients, "client", "NAME=USER[/GROUP,GROUP] (repeatable)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *dir == "" || *server == "" || *serviceIP == "" {
		fmt.Fprintln(os.Stderr, "pki: --dir, --server and --service-ip are required")
		return 2
	}
	if err := makePKI(*dir, *server, *serviceIP, clients); err != nil {
		fmt.Fprintf(os.Stderr, "pki: %v\n", err)
		return 1
	}
	return 0
}

// multiFlag is a repeatable string flag.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

func parseIdentity(spec string) (identity, error) {
	name, rest, ok := strings.Cut(spec, "=")
	if !ok || name == "" || rest == "" {
		return identity{}, fmt.Errorf("client %q is not NAME=USER[/GROUPS]", spec)
	}
	user, groups, _ := strings.Cut(rest, "/")
	id := identity{name: name, user: user}
	if groups != "" {
		id.groups = strings.Split(groups, ",")
	}
	return id, nil
}

func makePKI(dir, server, serviceIP string, clients []string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	caCert, caKey, err := loadOrMakeCA(dir)
	if err != nil {
		return err
	}
	ip := net.ParseIP(serviceIP)
	if ip == nil {
		return fmt.Errorf("--service-ip %q is not an IP address", serviceIP)
	}
	serving := &x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver"},
		DNSNames:    []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1"), ip},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if err := ensureLeaf(dir, "apiserver", serving, caCert, caKey); err != nil {
		return err
	}
	if err := ensureServiceAccountKey(dir); err != nil {
		return err
	}
	for _, spec := range clients {
		id, err := parseIdentity(spec)
		if err != nil {
			return err
		}
		leaf := &x509.Certificate{
			Subject:     pkix.Name{CommonName: id.user, Organization: id.groups},
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		}
		if err := ensureLeaf(dir, "client-"+id.name, leaf, caCert, caKey); err != nil {
			return err
		}
		if err := writeKubeconfig(dir, id, server); err != nil {
			return err
		}
	}
	return nil
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func writePEM(path, kind string, der []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func newKey() (*ecdsa.PrivateKey, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	der, err := x509.MarshalECPrivateKey(key)
	return key, der, err
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	return n
}

func loadOrMakeCA(dir string) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	crtPath, keyPath := filepath.Join(dir, "ca.crt"), filepath.Join(dir, "ca.key")
	if !exists(crtPath) || !exists(keyPath) {
		key, der, err := newKey()
		if err != nil {
			return nil, nil, err
		}
		tmpl := &x509.Certificate{
			SerialNumber:          serial(),
			Subject:               pkix.Name{CommonName: "kubeplane-ca"},
			NotBefore:             time.Now().Add(-time.Hour),
			NotAfter:              time.Now().AddDate(10, 0, 0),
			KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
			BasicConstraintsValid: true,
			IsCA:                  true,
		}
		crt, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
		if err != nil {
			return nil, nil, err
		}
		if err := writePEM(keyPath, "EC PRIVATE KEY", der); err != nil {
			return nil, nil, err
		}
		if err := writePEM(crtPath, "CERTIFICATE", crt); err != nil {
			return nil, nil, err
		}
	}
	crt, err := readPEM(crtPath)
	if err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(crt)
	if err != nil {
		return nil, nil, err
	}
	kder, err := readPEM(keyPath)
	if err != nil {
		return nil, nil, err
	}
	key, err := x509.ParseECPrivateKey(kder)
	return cert, key, err
}

func readPEM(path string) ([]byte, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(raw)
	if block == nil {
		return nil, fmt.Errorf("%s holds no PEM block", path)
	}
	return block.Bytes, nil
}

func ensureLeaf(dir, name string, tmpl, ca *x509.Certificate, caKey *ecdsa.PrivateKey) error {
	crtPath, keyPath := filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	if exists(crtPath) && exists(keyPath) {
		return nil
	}
	key, der, err := newKey()
	if err != nil {
		return err
	}
	tmpl.SerialNumber = serial()
	tmpl.NotBefore = time.Now().Add(-time.Hour)
	tmpl.NotAfter = time.Now().AddDate(10, 0, 0)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	crt, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return err
	}
	if err := writePEM(keyPath, "EC PRIVATE KEY", der); err != nil {
		return err
	}
	return writePEM(crtPath, "CERTIFICATE", crt)
}

func ensureServiceAccountKey(dir string) error {
	keyPath, pubPath := filepath.Join(dir, "sa.key"), filepath.Join(dir, "sa.pub")
	if exists(keyPath) && exists(pubPath) {
		return nil
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return err
	}
	if err := writePEM(keyPath, "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(key)); err != nil {
		return err
	}
	return writePEM(pubPath, "PUBLIC KEY", pub)
}

// writeKubeconfig writes <dir>/<name>.kubeconfig (JSON, which kubeconfig loaders accept) with
// absolute paths to the CA and the client's certificate and key.
func writeKubeconfig(dir string, id identity, server string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	cfg := map[string]any{
		"apiVersion": "v1",
		"kind":       "Config",
		"clusters": []any{map[string]any{"name": "kubeplane", "cluster": map[string]any{
			"server": server, "certificate-authority": filepath.Join(abs, "ca.crt"),
		}}},
		"users": []any{map[string]any{"name": id.user, "user": map[string]any{
			"client-certificate": filepath.Join(abs, "client-"+id.name+".crt"),
			"client-key":         filepath.Join(abs, "client-"+id.name+".key"),
		}}},
		"contexts": []any{map[string]any{"name": "kubeplane", "context": map[string]any{
			"cluster": "kubeplane", "user": id.user,
		}}},
		"current-context": "kubeplane",
	}
	raw, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return err
	}
	path := filepath.Join(dir, id.name+".kubeconfig")
	if old, err := os.ReadFile(path); err == nil && string(old) == string(raw) {
		return nil
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, raw, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
