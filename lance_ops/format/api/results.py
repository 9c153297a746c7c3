"""What the handle's mutations return, shaped as pylance's result dicts."""

from typing import TypedDict


class DeleteResult(TypedDict):
    """``LanceDataset.delete``'s result (pylance's ``DeleteResult``)."""

    num_deleted_rows: int


class UpdateResult(TypedDict):
    """``LanceDataset.update``'s result (pylance's ``UpdateResult``)."""

    num_rows_updated: int
