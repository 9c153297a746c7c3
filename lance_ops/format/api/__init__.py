"""The pylance-shaped handle: LanceDataset, module-level functions, fragments, scanners, results."""
