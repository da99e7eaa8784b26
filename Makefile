# A thin layer over scripts/: the same scripts run locally and in CI.
.PHONY: run test fuzz
run:
	go run ./cmd/tabbridge
test:
	scripts/test
fuzz:
	scripts/fuzz
