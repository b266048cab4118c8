# Sourced by the image build's RUN steps that use pip: the build host's pip configuration
# and CA bundle, when the build passes them as secrets (`make docker-build` does), are
# used for that step only; secrets are never part of a layer.
if [ -s /run/secrets/pip.conf ]; then export PIP_CONFIG_FILE=/run/secrets/pip.conf; fi
if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca; fi
export PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore
