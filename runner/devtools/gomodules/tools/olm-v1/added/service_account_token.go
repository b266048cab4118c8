package sa

import "os"

// serviceAccountTokenFile is the token file the component reads its service account's
// name from: $OLMV1_SERVICE_ACCOUNT_TOKEN_FILE when set (a component running outside a
// pod, as ansible-operator runs it), else the path every pod has.
func serviceAccountTokenFile() string {
	if path := os.Getenv("OLMV1_SERVICE_ACCOUNT_TOKEN_FILE"); path != "" {
		return path
	}
	return "/var/run/secrets/kubernetes.io/serviceaccount/token"
}
