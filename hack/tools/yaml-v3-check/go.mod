// Checks karmadactl interpret's YAML against gopkg.in/yaml.v3 (the encoder Karmada's command uses),
// at the version Karmada v1.16 builds with. Not part of the product.
module karmada-rs/hack/tools/yaml-v3-check

go 1.22

require gopkg.in/yaml.v3 v3.0.1
