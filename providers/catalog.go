package providers

import "github.com/fleetquota/throttle/config"

// CatalogName is the name LoadCatalog gives the embedded catalog in error
// messages.
const CatalogName = "config/providers.yaml"

// LoadCatalog loads the catalog of real vendors' published limits that
// ships with the module (config/providers.yaml). Its ${VAR:-default}
// variables are read through the options (os.LookupEnv by default).
func LoadCatalog(opts ...Option) (*Config, error) {
	return Load(CatalogName, config.Providers(), opts...)
}
