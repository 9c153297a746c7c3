"""Operations on a table (planners): routine cleanup (:mod:`.cleanup_lite`)."""
