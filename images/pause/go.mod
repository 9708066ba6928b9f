// Module pause builds the pod sandbox ("pause") binary for the kindtest node
// image.
module github.com/kindtest/kindtest/images/pause

go 1.26.0
