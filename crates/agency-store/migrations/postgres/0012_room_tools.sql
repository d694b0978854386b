-- The tools a room agent's model may call while it answers (a JSON array of `server/tool`).
ALTER TABLE room_participants ADD COLUMN tools TEXT NOT NULL DEFAULT '[]';
