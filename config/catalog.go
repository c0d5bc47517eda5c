// Package config ships the catalog of real vendors' published rate limits,
// config/providers.yaml, embedded so that programs need no file on disk.
// Load it with providers.LoadCatalog, or copy the file and edit it.
package config

import _ "embed"

//go:embed providers.yaml
var catalog string

// Providers returns the catalog, config/providers.yaml, as YAML. Each call
// returns a new copy.
func Providers() []byte { return []byte(catalog) }
