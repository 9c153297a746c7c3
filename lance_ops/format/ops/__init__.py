"""Operations planned and executed: writes, delete/update, merge_insert, schema evolution, cleanup, compaction, change feed, index builds."""
