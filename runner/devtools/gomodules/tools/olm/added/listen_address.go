// Added to OLM's pkg/lib/server at build time (on a copy of the module, see
// runner/devtools/cluster/components.py): OLM binds its health and metrics server to a fixed
// ":8080" (":8443" with TLS), which two operators run as local processes cannot share.

package server

import "os"

// listenAddress is $OLM_LISTEN_ADDRESS when set (e.g. "127.0.0.1:41234"), else fallback.
func listenAddress(fallback string) string {
	if address := os.Getenv("OLM_LISTEN_ADDRESS"); address != "" {
		return address
	}
	return fallback
}
