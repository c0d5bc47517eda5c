package providers

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/fleetquota/throttle/config"
)

// FuzzLoad feeds arbitrary bytes to Load: no input may panic, and a
// configuration that loads must resolve requests without panicking.
// Seeds: every fixture and the catalog.
func FuzzLoad(f *testing.F) {
	files, _ := filepath.Glob("testdata/*/*.yaml")
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add(config.Providers())
	f.Add([]byte(registryYAML))
	lookup := WithLookupEnv(func(k string) (string, bool) {
		if k == "SET" {
			return "10/s", true
		}
		return "", false
	})
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Load("fuzz.yaml", data, lookup)
		if err != nil {
			if cfg != nil {
				t.Fatal("config with error")
			}
			return
		}
		for _, p := range cfg.Providers() {
			for _, h := range p.Hosts {
				host := h
				if len(host) > 2 && host[:2] == "*." {
					host = "x" + host[1:]
				}
				for _, path := range []string{"/", "/search/x", "/a/b/c/"} {
					req, err := http.NewRequest("POST", "https://placeholder"+path, nil)
					if err != nil {
						t.Fatal(err)
					}
					req.URL.Host = host
					req.Header.Set("Stripe-Account", "a{b}")
					res, ok, err := cfg.Resolve(req, Input{Business: "b:1", Labels: map[string]string{"class": "batch"}})
					if !ok {
						t.Fatalf("host %q of provider %s did not resolve", host, p.Name)
					}
					if err == nil && len(res.Request.Items) > 0 {
						if verr := res.Request.Validate(); verr != nil {
							t.Fatalf("resolved an invalid request: %v", verr)
						}
					}
				}
			}
		}
	})
}
