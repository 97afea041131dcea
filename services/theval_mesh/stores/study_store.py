"""The answers of pairwise preference studies (`theval study`), in a database (stores.database: a
SQLite file by default). One row per (study, rater, pair): written when the pair is first shown,
completed when it is answered; the left video is model_a/video_a, the right one model_b/video_b."""
import time
from pathlib import Path

from theval_mesh.pure import csv_cells
from theval_mesh.pure.errors import UserError
from theval_mesh.pure.store_location import is_server
from theval_mesh.pure.study_plan import Pair
from theval_mesh.stores.database import open_database

MIGRATIONS = ["""
CREATE TABLE IF NOT EXISTS study_answers (
    study TEXT NOT NULL, rater TEXT NOT NULL, pair_index INTEGER NOT NULL,
    model_a TEXT NOT NULL, video_a TEXT NOT NULL, model_b TEXT NOT NULL, video_b TEXT NOT NULL,
    preferred TEXT, shown_at DOUBLE PRECISION NOT NULL, answered_at DOUBLE PRECISION,
    PRIMARY KEY (study, rater, pair_index))
"""]

# What `theval align` reads (preferred: the name of the preferred model)
EXPORT_COLUMNS = ("model_a", "model_b", "preferred", "video_a", "video_b", "rater")


class StudyStore:
    def __init__(self, location, create: bool = True):
        location = str(location)
        if not is_server(location):
            if not create and not Path(location).is_file():
                raise UserError(f"study store {location}: no such file")
            Path(location).parent.mkdir(parents=True, exist_ok=True)
        self.location = location
        self._sql = open_database(location, "study store", "study", MIGRATIONS)

    def close(self):
        self._sql.close()

    def answered(self, study: str, rater: str) -> set[int]:
        rows = self._sql.rows("SELECT pair_index FROM study_answers WHERE study = ? AND rater = ? "
                              "AND preferred IS NOT NULL", (study, rater))
        return {row[0] for row in rows}

    def show(self, study: str, rater: str, pair: Pair):
        """Record that the pair is on screen; a reload keeps the first time it was shown."""
        with self._sql.transaction() as db:
            db.execute("INSERT INTO study_answers (study, rater, pair_index, model_a, video_a, model_b, video_b, "
                       "shown_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (study, rater, pair_index) DO NOTHING",
                       (study, rater, pair.index, pair.left_model, pair.left_video, pair.right_model,
                        pair.right_video, time.time()))

    def answer(self, study: str, rater: str, pair: Pair, side: str) -> bool:
        """Record the preferred side of a shown pair; False if it was not shown or already answered
        (the first answer stands: a double click does not change it)."""
        with self._sql.transaction() as db:
            cursor = db.execute("UPDATE study_answers SET preferred = ?, answered_at = ? WHERE study = ? AND "
                                "rater = ? AND pair_index = ? AND preferred IS NULL",
                                (pair.model(side), time.time(), study, rater, pair.index))
            return cursor.rowcount == 1

    def rows(self, study: str | None = None) -> list[dict]:
        """The answered rows (of one study, or all), in the order they were answered."""
        columns = ("study", "rater", "pair_index", "model_a", "video_a", "model_b", "video_b", "preferred",
                   "shown_at", "answered_at")
        where, args = ("AND study = ?", (study,)) if study else ("", ())
        found = self._sql.rows(f"SELECT {', '.join(columns)} FROM study_answers WHERE preferred IS NOT NULL "
                               f"{where} ORDER BY answered_at, study, rater, pair_index", args)
        return [dict(zip(columns, row)) for row in found]

    def export_csv(self, out, study: str | None = None) -> int:
        """Write the answered rows as CSV (EXPORT_COLUMNS) to the text stream `out`; their number."""
        rows = self.rows(study)
        writer = csv_cells.Writer(out, lineterminator="\n")  # video names are the folders' file names
        writer.writerow(EXPORT_COLUMNS)
        writer.writerows([row[c] for c in EXPORT_COLUMNS] for row in rows)
        return len(rows)
