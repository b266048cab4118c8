package main

import "os"

// webhookHost is the address catalogd's webhook server binds to: $CATALOGD_WEBHOOK_HOST
// (e.g. 127.0.0.1) when set, else every interface, as upstream.
func webhookHost() string {
	return os.Getenv("CATALOGD_WEBHOOK_HOST")
}
