"""torch networks of the variational models (imported only by them: ``import models`` stays
free of torch)."""
