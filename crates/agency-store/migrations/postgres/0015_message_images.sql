-- The images a user's message shows (a JSON array of URLs, `data:` URLs too; NULL for none):
-- the manager's model is sent them beside the text.
ALTER TABLE messages ADD COLUMN images TEXT;
