-- Who is answering which message of a room, from before the call starts until its answer (or
-- failure) is stored with it: a row left here is an answer a crash interrupted, which the next
-- start stores as a failure in the agent's place.
CREATE TABLE room_answering (
    room_id        BLOB NOT NULL REFERENCES rooms (id) ON DELETE CASCADE,
    message_id     BLOB NOT NULL,
    participant_id BLOB NOT NULL REFERENCES room_participants (id) ON DELETE CASCADE,
    PRIMARY KEY (room_id, message_id, participant_id)
) WITHOUT ROWID;
