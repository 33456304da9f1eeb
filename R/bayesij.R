# bayesij from R: audit an rstanarm or brms fit without leaving R.
#
#   source("R/bayesij.R")          # from a checkout, or the file copied anywhere
#   audit <- bayesij_audit(fit, report = "audit.html")
#   audit$summary                   # the audit's conclusions, a line each
#   audit$tables[["PSIS-LOO"]]      # every table as a data frame
#
# The bridge is the command line: the draws (chains one after another), the pointwise
# log-likelihood and the observations' names are written as CSV files, `python -m bayesij.cli
# audit` reads them, and its tables come back as CSV files listed in index.json (the
# exchange format of docs/r.md). No reticulate and no NumPy ABI coupling: any R that can
# run Python works. Needs jsonlite, and Python with bayesij installed
# (`pip install bayesij`, or `pip install -e .` in a checkout).

bayesij_audit <- function(fit,
                          report = NULL,
                          groups = NULL,
                          targets = NULL,
                          quantities = NULL,
                          alpha_max = 0.1,
                          python = Sys.getenv("BAYESIJ_PYTHON", "python3"),
                          workdir = tempfile("bayesij-"),
                          quiet = FALSE) {
  if (!requireNamespace("jsonlite", quietly = TRUE)) {
    stop("bayesij_audit: found no jsonlite package; expected it installed ",
         "(install.packages(\"jsonlite\") or Debian's r-cran-jsonlite).", call. = FALSE)
  }
  draws <- bayesij_draws(fit)
  log_lik <- bayesij_log_lik(fit, nrow(draws$matrix))
  dir.create(workdir, showWarnings = FALSE, recursive = TRUE)
  draws_csv <- file.path(workdir, "draws.csv")
  log_lik_csv <- file.path(workdir, "log_lik.csv")
  tables_dir <- file.path(workdir, "tables")
  utils::write.csv(draws$matrix, draws_csv, row.names = FALSE)
  utils::write.csv(log_lik, log_lik_csv, row.names = FALSE)
  args <- c("-m", "bayesij.cli", "audit", "--draws", draws_csv, "--log-lik", log_lik_csv,
            "--chains", draws$chains, "--tables", tables_dir,
            "--alpha-max", format(alpha_max), "--no-progress")
  if (!is.null(groups)) {
    if (length(groups) != ncol(log_lik)) {
      stop(sprintf(paste0("bayesij_audit: groups: found %d labels; expected one per ",
                          "observation (%d)."), length(groups), ncol(log_lik)), call. = FALSE)
    }
    groups_csv <- file.path(workdir, "groups.csv")
    utils::write.csv(data.frame(group = as.character(groups)), groups_csv, row.names = FALSE)
    args <- c(args, "--groups", paste0(groups_csv, ":group"))
  }
  for (target in targets) args <- c(args, "--target", format(target))
  for (quantity in quantities) args <- c(args, "--quantity", quantity)
  if (!is.null(report)) args <- c(args, "--out", normalizePath(report, mustWork = FALSE))
  output <- suppressWarnings(system2(python, shQuote(args), stdout = TRUE, stderr = TRUE,
                                     env = bayesij_library_path()))
  status <- attr(output, "status")
  if (!is.null(status) && status != 0) {
    stop("bayesij_audit: the audit failed:\n", paste(output, collapse = "\n"), call. = FALSE)
  }
  if (!quiet) message(paste(output, collapse = "\n"))
  bayesij_read_tables(tables_dir, report)
}

# LD_LIBRARY_PATH for the Python R starts, without what R put in front of it (its own
# lib folder, the system's and Java's): with R's, a Python built with a shared libpython
# (pyenv's) can load the system's libpython instead, whose site-packages hold no bayesij.
bayesij_library_path <- function() {
  paths <- strsplit(Sys.getenv("LD_LIBRARY_PATH"), ":", fixed = TRUE)[[1]]
  system <- grepl("^/(usr/)?lib(64)?(/[A-Za-z0-9_]+-linux-gnu)?/?$", paths)
  keep <- paths[nzchar(paths) & !startsWith(paths, R.home()) & !grepl("/jvm/", paths) & !system]
  paste0("LD_LIBRARY_PATH=", shQuote(paste(keep, collapse = ":")))
}

# The draws as a matrix with chains one after another, and the number of chains.
bayesij_draws <- function(fit) {
  arr <- tryCatch(as.array(fit), error = function(e) NULL)
  if (is.null(arr) || length(dim(arr)) != 3) {
    stop(sprintf(paste0("bayesij_audit: fit: found an object of class %s; expected a ",
                        "fitted model whose as.array() gives iterations x chains x ",
                        "parameters (rstanarm's stanreg, brms's brmsfit)."),
                 paste(class(fit), collapse = "/")), call. = FALSE)
  }
  n_iter <- dim(arr)[1]
  n_chains <- dim(arr)[2]
  matrix <- do.call(rbind, lapply(seq_len(n_chains), function(c) arr[, c, , drop = TRUE]))
  if (is.null(dim(matrix))) matrix <- matrix(matrix, ncol = 1)
  colnames(matrix) <- dimnames(arr)[[3]]
  list(matrix = matrix, chains = n_chains, iterations = n_iter)
}

# The pointwise log-likelihood (draws x observations, chains one after another), its
# columns named by the observations' row names.
bayesij_log_lik <- function(fit, n_draws) {
  log_lik <- tryCatch(rstantools::log_lik(fit), error = function(e) {
    tryCatch(log_lik(fit), error = function(e2) NULL)
  })
  if (is.null(log_lik) || !is.matrix(log_lik) || nrow(log_lik) != n_draws) {
    stop(paste0("bayesij_audit: fit: found no pointwise log-likelihood of one row per draw; ",
                "expected log_lik(fit) to give a draws x observations matrix."), call. = FALSE)
  }
  names <- tryCatch(rownames(stats::model.frame(fit)), error = function(e) NULL)
  if (length(names) == ncol(log_lik)) colnames(log_lik) <- names
  else colnames(log_lik) <- paste0("obs", seq_len(ncol(log_lik)))
  log_lik
}

# The audit written by `bayesij audit --tables FOLDER` as R objects: the heading, the
# summary lines, and each table as a data frame named by its title.
bayesij_read_tables <- function(folder, report = NULL) {
  index <- jsonlite::fromJSON(file.path(folder, "index.json"), simplifyVector = FALSE)
  tables <- list()
  for (entry in index$tables) {
    tables[[entry$title]] <- utils::read.csv(file.path(folder, entry$file),
                                             check.names = FALSE, stringsAsFactors = FALSE)
  }
  structure(list(heading = index$heading,
                 summary = unlist(index$summary),
                 tables = tables,
                 report = report),
            class = "bayesij_audit")
}

print.bayesij_audit <- function(x, ...) {
  cat(x$heading, "\n\n", sep = "")
  cat(paste0("- ", x$summary), sep = "\n")
  cat("\nTables: ", paste(names(x$tables), collapse = "; "), "\n", sep = "")
  if (!is.null(x$report)) cat("Report: ", x$report, "\n", sep = "")
  invisible(x)
}
