// Added to operator-registry's cmd/opm/serve at build time (on a copy of the module, see
// runner/devtools/cluster/components.py): `opm serve` listens on ":<port>", every interface,
// and has no flag for the host.

package serve

import "os"

// serveHost is $OPM_SERVE_HOST (e.g. "127.0.0.1"), or "" for every interface.
func serveHost() string {
	return os.Getenv("OPM_SERVE_HOST")
}
