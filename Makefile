# The two commands README.md starts with: `make trial` and `make test`.
# Both set the machine up first (idempotent) and need nothing installed beforehand
# but make itself.
.PHONY: setup setup-guest test lint unit trial schemas mutation

VENV := .venv/bin

setup:
	@bash .ci/setup

# The tests also run the worker inside the guest, which needs the guest's own wheel, and
# the tests run the pinned OpenCode executable (fetched once from the npm registry).
setup-guest:
	@bash .ci/setup --guest-wheel

lint: setup-guest
	$(VENV)/ruff check .
	$(VENV)/ruff format --check .
	$(VENV)/mypy

# The whole suite, integration tests included (CI runs this via .ci/run). The libvirt
# conformance tests need a libvirtd: .ci/libvirtd-up starts one when none answers. The
# Slurm executor's tests need a cluster: .ci/slurm-up starts a single-node one.
test: lint
	@bash .ci/libvirtd-up
	@bash .ci/slurm-up
	$(VENV)/pytest

# Fast unit tests only, for the edit loop.
unit: setup
	$(VENV)/pytest -m "not integration"

schemas: setup
	$(VENV)/harness schema --out docs/schemas --reference docs/receipt-reference.md

# Exits 0 whenever the trial wrote a valid receipt, whatever the verdict (.ci/trial).
PROFILE ?= qwen-coder
trial: setup
	@bash .ci/trial --profile $(PROFILE)

# Mutation testing of the safety modules with cosmic-ray (docs/mutation.md). Slow (hours
# for every scope): not part of `make test`. SCOPES="receipts/verdict guest/gate" runs some.
mutation: setup
	@bash .ci/mutation $(SCOPES)
