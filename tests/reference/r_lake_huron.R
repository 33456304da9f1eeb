# Writes lake_huron.csv: annual mean levels of Lake Huron (feet), 1875-1972, the series the
# leave-future-out tests use (R's datasets::LakeHuron; Buerkner, Gabry and Vehtari 2020 use it
# to illustrate LFO). Run from tests/reference: Rscript r_lake_huron.R
write.csv(
  data.frame(year = as.integer(time(LakeHuron)), level = as.numeric(LakeHuron)),
  "lake_huron.csv", row.names = FALSE
)
